// Command refusalcost measures what a node spends on a request it serves
// and on one it refuses: it runs closed-loop point reads of one key
// against a running node and prints the node's CPU time (from
// /proc/PID/stat) per request. Start the node once as usual and once with
// a tiny --admission-target so that it refuses nearly everything it can
// (docs/admission.md); this measured 24.8 µs per served and 25.0 µs per
// refused unary gRPC Get at commit fa99013, when reads were still refused
// by delay (they no longer are, for that reason: docs/benchmarks/ecstore.md,
// issue 17). Modes: unary gRPC (-addr), the Redis protocol (-resp), the Go client
// on its Batch stream (-stream), and one Get per message on a Batch stream
// per worker (-raw-stream): 14.1 and 15.6 µs per served Get on 2026-11-25.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

func cpuTicks(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// worker makes one request; a nil error counts as served, any other as
// refused.
type worker func() error

func main() {
	addr := flag.String("addr", "", "the node's gRPC address")
	pid := flag.Int("pid", 0, "the node's process ID")
	workers := flag.Int("workers", 64, "closed-loop workers")
	d := flag.Duration("d", 5*time.Second, "how long to measure")
	raddr := flag.String("resp", "", "the node's Redis address: read over RESP instead")
	stream := flag.Bool("stream", false, "read through the Go client, on its Batch stream")
	raw := flag.Bool("raw-stream", false, "one Batch stream per worker, one Get per message, no client-side window")
	flag.Parse()
	label, newWorker := "gRPC", unaryWorkers(*addr)
	switch {
	case *raddr != "":
		label, newWorker = "RESP", respWorker(*raddr)
	case *stream:
		label, newWorker = "stream", streamWorkers(*addr)
	case *raw:
		label, newWorker = "raw stream", rawStreamWorker(*addr)
	}
	var ok, bad atomic.Int64
	ws := make([]worker, *workers)
	for i := range ws {
		ws[i] = newWorker(i)
	}
	c0 := cpuTicks(*pid)
	end := time.Now().Add(*d)
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			for time.Now().Before(end) {
				if w() == nil {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	c1 := cpuTicks(*pid)
	n := ok.Load() + bad.Load()
	fmt.Printf("%s ok=%d refused=%d total/s=%.0f node CPU µs/req=%.1f\n", label, ok.Load(), bad.Load(), float64(n)/d.Seconds(), float64(c1-c0)*10e3/float64(n))
}

func unaryWorkers(addr string) func(int) worker {
	var conns []tidekvpb.KVClient
	for range 4 {
		cc, _ := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		conns = append(conns, tidekvpb.NewKVClient(cc))
	}
	ctx := context.Background()
	conns[0].Put(ctx, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	return func(i int) worker {
		kv := conns[i%4]
		return func() error {
			_, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte("k")})
			return err
		}
	}
}

func respWorker(addr string) func(int) worker {
	return func(int) worker {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			panic(err)
		}
		br := bufio.NewReader(c)
		return func() error {
			c.Write([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"))
			line, _ := br.ReadString('\n')
			if len(line) == 0 || line[0] == '-' {
				return errors.New(line)
			}
			if line[0] == '$' && line[1] != '-' {
				br.ReadString('\n')
			}
			return nil
		}
	}
}

func streamWorkers(addr string) func(int) worker {
	cfg := client.DefaultConfig()
	cfg.Addrs = []string{addr}
	cfg.FailFastOnOverload = true
	cfg.MaxAttempts = 1
	c, err := client.New(cfg)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		panic(err)
	}
	return func(int) worker {
		return func() error {
			_, err := c.Get(ctx, []byte("k"))
			return err
		}
	}
}

func rawStreamWorker(addr string) func(int) worker {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	kv := tidekvpb.NewKVClient(cc)
	ctx := context.Background()
	kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	req := &tidekvpb.KVBatchRequest{Requests: []*tidekvpb.KVRequest{{Id: 1, Request: &tidekvpb.KVRequest_Get{Get: &tidekvpb.GetRequest{Key: []byte("k")}}}}}
	return func(int) worker {
		st, err := kv.Batch(ctx)
		if err != nil {
			panic(err)
		}
		return func() error {
			if err := st.Send(req); err != nil {
				return err
			}
			resp, err := st.Recv()
			if err != nil {
				return err
			}
			if resp.GetResponses()[0].GetErrorCode() != 0 {
				return errors.New(resp.GetResponses()[0].GetErrorMessage())
			}
			return nil
		}
	}
}
