package transport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// The cost of a Raft message on the wire, both ends in this process, so
// the CPU per message (getrusage over the run, reported as cpu-µs/msg)
// counts the sender's and the receiver's work: marshal, framing, syscalls,
// goroutine hand-offs, unmarshal. Each message is a MsgApp carrying one
// 1 KB entry, as a YCSB update's. Two framings of the same batches:
// gRPC's client stream (what GRPC uses) and a length-prefixed frame on a
// plain TCP connection (the leanest framing there is, as the floor gRPC
// is measured against). msgs is how many messages share one frame.
//
//	go test -run '^$' -bench 'Frame' -benchmem -count 3 ./internal/transport/

func costMsg(i uint64) *tidekvpb.RaftMessage {
	return &tidekvpb.RaftMessage{RangeId: 7, FromNodeId: 1, ToNodeId: 2,
		Message: &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: proto.Uint64(2), From: proto.Uint64(1),
			Term: proto.Uint64(3), Index: proto.Uint64(i), LogTerm: proto.Uint64(3), Commit: proto.Uint64(i),
			Entries: []*raftpb.Entry{{Term: proto.Uint64(3), Index: proto.Uint64(i + 1), Data: make([]byte, 1024)}}}}
}

// countingServer counts the messages it receives and signals when the
// count reaches want.
type countingServer struct {
	tidekvpb.UnimplementedRaftServer
	got, want atomic.Int64
	done      chan struct{}
}

func (s *countingServer) add(n int) {
	if s.got.Add(int64(n)) >= s.want.Load() {
		s.done <- struct{}{}
	}
}

func (s *countingServer) RaftStream(stream tidekvpb.Raft_RaftStreamServer) error {
	for {
		b, err := stream.Recv()
		if err != nil {
			return err
		}
		s.add(len(b.GetMessages()))
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runFrames sends b.N messages in frames of msgs through send, each
// frame once the receiver has counted the last (one frame in flight, as a
// replica's append and its answer: each frame its own write and read).
func runFrames(b *testing.B, msgs int, srv *countingServer, send func(*tidekvpb.RaftMessageBatch) error) {
	batch := &tidekvpb.RaftMessageBatch{}
	for i := range msgs {
		batch.Messages = append(batch.Messages, costMsg(uint64(i)))
	}
	srv.got.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for sent := 0; sent < b.N; sent += msgs {
		batch.Messages = batch.Messages[:min(msgs, b.N-sent)]
		srv.want.Store(int64(sent + len(batch.Messages)))
		if err := send(batch); err != nil {
			b.Fatal(err)
		}
		<-srv.done
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/msg")
}

func BenchmarkGRPCFrame(b *testing.B) {
	for _, msgs := range []int{1, 8} {
		b.Run(fmt.Sprintf("msgs=%d", msgs), func(b *testing.B) {
			srv := &countingServer{done: make(chan struct{}, 1)}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			gs := grpc.NewServer()
			tidekvpb.RegisterRaftServer(gs, srv)
			go func() { _ = gs.Serve(lis) }()
			defer gs.Stop()
			tr, err := NewGRPC(DefaultConfig(), func(uint64) (string, bool) { return lis.Addr().String(), true }, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Stop()
			stream, cancel, err := tr.openStream(2)
			if err != nil {
				b.Fatal(err)
			}
			defer cancel()
			runFrames(b, msgs, srv, stream.Send)
		})
	}
}

func BenchmarkTCPFrame(b *testing.B) {
	for _, msgs := range []int{1, 8} {
		b.Run(fmt.Sprintf("msgs=%d", msgs), func(b *testing.B) {
			srv := &countingServer{done: make(chan struct{}, 1)}
			c := loopbackConn(b, func(c net.Conn) {
				r := bufio.NewReaderSize(c, 64<<10)
				var hdr [4]byte
				var body []byte
				for {
					if _, err := io.ReadFull(r, hdr[:]); err != nil {
						return
					}
					if n := int(binary.LittleEndian.Uint32(hdr[:])); cap(body) >= n {
						body = body[:n]
					} else {
						body = make([]byte, n)
					}
					if _, err := io.ReadFull(r, body); err != nil {
						return
					}
					var bt tidekvpb.RaftMessageBatch
					if err := proto.Unmarshal(body, &bt); err != nil {
						return
					}
					srv.add(len(bt.GetMessages()))
				}
			})
			var buf []byte
			runFrames(b, msgs, srv, func(bt *tidekvpb.RaftMessageBatch) error {
				buf = append(buf[:0], 0, 0, 0, 0)
				var err error
				if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf, bt); err != nil {
					return err
				}
				binary.LittleEndian.PutUint32(buf, uint32(len(buf)-4))
				_, err = c.Write(buf)
				return err
			})
		})
	}
}

// countingHandler counts messages as countingServer does, as the store
// receives them from GRPC.
type countingHandler struct{ *countingServer }

func (h countingHandler) HandleRaftMessage(*tidekvpb.RaftMessage) { h.add(1) }
func (h countingHandler) HandleSnapshot(*tidekvpb.RaftMessage, io.Reader) error {
	return nil
}

// BenchmarkTransportPath is the whole path of GRPC, queue to handler:
// msgs messages queued at once (a scheduler round's to one peer), the
// next once all arrived; to a node with frames and to one without (the
// gRPC stream GRPC used before). cpu-µs/msg as above.
//
//	go test -run '^$' -bench 'TransportPath' -benchtime 20000x -count 3 ./internal/transport/
func BenchmarkTransportPath(b *testing.B) {
	for _, path := range []string{"frames", "grpc-stream"} {
		for _, msgs := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/msgs=%d", path, msgs), func(b *testing.B) {
				srv := &countingServer{done: make(chan struct{}, 1)}
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				addr := lis.Addr().String()
				resolve := func(uint64) (string, bool) { return addr, true }
				recv, err := NewGRPC(DefaultConfig(), resolve, countingHandler{srv})
				if err != nil {
					b.Fatal(err)
				}
				defer recv.Stop()
				gs := grpc.NewServer()
				recv.Register(gs)
				served := lis
				if path == "frames" {
					served = recv.Listen(lis)
				}
				go func() { _ = gs.Serve(served) }()
				defer gs.Stop()
				send, err := NewGRPC(DefaultConfig(), resolve, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer send.Stop()
				runFrames(b, msgs, srv, func(bt *tidekvpb.RaftMessageBatch) error {
					for _, m := range bt.Messages {
						if !send.Send(m) {
							return fmt.Errorf("queue full")
						}
					}
					return nil
				})
			})
		}
	}
}

// loopbackConn is a client connection to a loopback listener whose one
// accepted connection serve handles; both close when b ends.
func loopbackConn(b *testing.B, serve func(net.Conn)) net.Conn {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lis.Close() })
	go func() {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
