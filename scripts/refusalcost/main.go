// Command refusalcost measures what a node spends on a request it serves
// and on one it refuses: it runs closed-loop point reads of one key
// against a running node, over gRPC (-addr) or the Redis protocol (-resp),
// and prints the node's CPU time (from /proc/PID/stat) per request. Start
// the node once as usual and once with a tiny --admission-target so that
// it refuses nearly everything it can (docs/admission.md); this measured
// 24.8 µs per served and 25.0 µs per refused gRPC Get at commit fa99013,
// when reads were still refused by delay (they no longer are, for that
// reason: docs/benchmarks.md, issue 17). -stream reads through the Go
// client on its Batch stream, -raw-stream with one Get per message on a
// stream per worker (14.1 and 15.6 µs per served Get on 2026-11-25).
package main

import (
	"bufio"
	"context"
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

func main() {
	addr := flag.String("addr", "", "")
	pid := flag.Int("pid", 0, "")
	workers := flag.Int("workers", 64, "")
	d := flag.Duration("d", 5*time.Second, "")
	raddr := flag.String("resp", "", "")
	stream := flag.Bool("stream", false, "through the Go client, on its Batch stream (reads refused at the stream's gate)")
	raw := flag.Bool("raw-stream", false, "one Batch stream per worker, one Get per message, no client-side window")
	flag.Parse()
	if *raddr != "" {
		respMain(*raddr, *pid, *workers, *d)
		return
	}
	if *stream {
		streamMain(*addr, *pid, *workers, *d)
		return
	}
	if *raw {
		rawStreamMain(*addr, *pid, *workers, *d)
		return
	}
	var conns []tidekvpb.KVClient
	for range 4 {
		cc, _ := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		conns = append(conns, tidekvpb.NewKVClient(cc))
	}
	ctx := context.Background()
	conns[0].Put(ctx, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	var ok, bad atomic.Int64
	c0 := cpuTicks(*pid)
	end := time.Now().Add(*d)
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() {
			kv := conns[w%4]
			for time.Now().Before(end) {
				if _, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: []byte("k")}); err == nil {
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
	cpu := float64(c1-c0) * 10e3 // ticks of 10ms -> µs
	fmt.Printf("ok=%d refused=%d total/s=%.0f node CPU µs/req=%.1f\n", ok.Load(), bad.Load(), float64(n)/d.Seconds(), cpu/float64(n))
}

func respMain(addr string, pid, workers int, d time.Duration) {
	var ok, bad atomic.Int64
	c0 := cpuTicks(pid)
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				panic(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for time.Now().Before(end) {
				c.Write([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"))
				line, _ := br.ReadString('\n')
				if line[0] == '-' {
					bad.Add(1)
					continue
				}
				if line[0] == '$' && line[1] != '-' {
					br.ReadString('\n')
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	c1 := cpuTicks(pid)
	n := ok.Load() + bad.Load()
	fmt.Printf("RESP ok=%d refused=%d total/s=%.0f node CPU µs/req=%.1f\n", ok.Load(), bad.Load(), float64(n)/d.Seconds(), float64(c1-c0)*10e3/float64(n))
}

func streamMain(addr string, pid, workers int, d time.Duration) {
	cfg := client.DefaultConfig()
	cfg.Addrs = []string{addr}
	cfg.FailFastOnOverload = true
	cfg.MaxAttempts = 1
	c, err := client.New(cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		panic(err)
	}
	var ok, bad atomic.Int64
	c0 := cpuTicks(pid)
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				if _, err := c.Get(ctx, []byte("k")); err == nil {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	c1 := cpuTicks(pid)
	n := ok.Load() + bad.Load()
	fmt.Printf("stream ok=%d refused=%d total/s=%.0f node CPU µs/req=%.1f\n", ok.Load(), bad.Load(), float64(n)/d.Seconds(), float64(c1-c0)*10e3/float64(n))
}

func rawStreamMain(addr string, pid, workers int, d time.Duration) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	kv := tidekvpb.NewKVClient(cc)
	ctx := context.Background()
	kv.Put(ctx, &tidekvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
	var ok, bad atomic.Int64
	c0 := cpuTicks(pid)
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			st, err := kv.Batch(ctx)
			if err != nil {
				panic(err)
			}
			req := &tidekvpb.KVBatchRequest{Requests: []*tidekvpb.KVRequest{{Id: 1, Request: &tidekvpb.KVRequest_Get{Get: &tidekvpb.GetRequest{Key: []byte("k")}}}}}
			for time.Now().Before(end) {
				if err := st.Send(req); err != nil {
					panic(err)
				}
				resp, err := st.Recv()
				if err != nil {
					panic(err)
				}
				if resp.GetResponses()[0].GetErrorCode() == 0 {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
			st.CloseSend()
		})
	}
	wg.Wait()
	c1 := cpuTicks(pid)
	n := ok.Load() + bad.Load()
	fmt.Printf("raw stream ok=%d refused=%d total/s=%.0f node CPU µs/req=%.1f\n", ok.Load(), bad.Load(), float64(n)/d.Seconds(), float64(c1-c0)*10e3/float64(n))
}
