package security

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/peer"
)

// BenchmarkLogin is what one password login that misses the cache costs
// the node: one Argon2id derivation, the same for a wrong password of a
// user and for a user that does not exist; and what the check of a
// logged-in user's call costs (cached: the password checked out before,
// from the same address), serially and from every core at once.
func BenchmarkLogin(b *testing.B) {
	dir, err := NewDirectory(OSFiles{}, writeUsers(b))
	if err != nil {
		b.Fatal(err)
	}
	freeDerivations(dir)
	if _, err := dir.PasswordRole("reader", "rpw", "10.0.0.1:4000"); err != nil {
		b.Fatal(err)
	}
	b.Run("cached/serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := dir.PasswordRole("reader", "rpw", "10.0.0.1:4000"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := dir.PasswordRole("reader", "rpw", "10.0.0.1:4000"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	reader, _ := dir.lookup("reader")
	for _, c := range []struct {
		name  string
		u     User
		known bool
	}{{"known user, wrong password", reader, true}, {"unknown user", User{}, false}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if ok, err := dir.check(c.u, c.known, "guess"); ok || err != nil {
					b.Fatal("a guess checked out, or was refused: ", err)
				}
			}
		})
	}
}

// BenchmarkGoodLoginsDuringBadFlood measures the latency of requests by a
// logged-in user (gRPC Basic auth on every call, from an address it logged
// in from before) while attackers guess passwords, each from its own
// address, one attempt per millisecond each: the known user's password and
// made-up users'. It reports the good requests' p50 and p99 in
// microseconds, the derivations the flood cost and its attempts refused
// unchecked: in a back-off, or for want of derivation budget (the node's
// default, a tenth of its CPUs).
func BenchmarkGoodLoginsDuringBadFlood(b *testing.B) {
	for _, attackers := range []int{0, 1, 64} {
		b.Run(fmt.Sprintf("attackers=%d", attackers), func(b *testing.B) {
			dir, err := NewDirectory(OSFiles{}, writeUsers(b))
			if err != nil {
				b.Fatal(err)
			}
			a := Authenticator{Users: dir}
			var derived, backoff, busy atomic.Int64
			dir.OnLoginFailure(func(f LoginFailure) {
				map[LoginResult]*atomic.Int64{LoginWrong: &derived, LoginBackoff: &backoff, LoginBusy: &busy}[f.Result].Add(1)
			})
			good := withSource(withBasic("reader", "rpw"), "10.0.0.1:4000")
			if err := a.authorize(good, "/tidekv.KV/Get"); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := range attackers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					src := fmt.Sprintf("10.1.%d.%d:5000", i/256, i%256)
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for n := 0; ; n++ {
						user := "reader"
						if n%2 == 1 {
							user = fmt.Sprintf("made-up-%d-%d", i, n)
						}
						_ = a.authorize(withSource(withBasic(user, "guess"), src), "/tidekv.KV/Get")
						select {
						case <-stop:
							return
						case <-tick.C:
						}
					}
				}()
			}
			lat := make([]time.Duration, 0, b.N)
			pace := time.NewTicker(500 * time.Microsecond)
			for b.Loop() {
				<-pace.C
				start := time.Now()
				if err := a.authorize(good, "/tidekv.KV/Get"); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			pace.Stop()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(derived.Load()), "derivations")
			b.ReportMetric(float64(backoff.Load()), "refused-backoff")
			b.ReportMetric(float64(busy.Load()), "refused-busy")
		})
	}
}

func withSource(ctx context.Context, addr string) context.Context {
	return peer.NewContext(ctx, &peer.Peer{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))})
}
