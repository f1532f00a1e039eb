package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestBackupRestoreUnderLoad: `ctl backup` of a 3-node cluster while
// writers keep incrementing counters and adding keys, and bank transfers
// run as transactions (client Txn), then `ctl restore`
// into a fresh cluster, which must hold exactly what a read of the source
// at the backup's timestamp returns: every key, with that value, and
// nothing written after it; and every write acknowledged before `ctl
// backup` started, whatever the read at the timestamp says (its cut comes
// from the cluster's clock, docs/transactions.md). The bank at the
// timestamp is exact: its accounts hold what replaying the transfers the
// backup holds gives, so their total is the opening total.
func TestBackupRestoreUnderLoad(t *testing.T) {
	bin := testcluster.Binary(t)
	ctx := testCtx(t, 4*time.Minute)
	src := testcluster.Start(t, testcluster.Options{Nodes: 3})
	cl := newClient(t, src.Addrs())
	waitReplicated(ctx, t, cl, 3)
	if _, err := cl.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "users", Rf: 3}); err != nil {
		t.Fatal(err)
	}
	users, err := cl.KeySpace(ctx, "users")
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 1024))
	for i := range 3000 {
		put(ctx, t, cl.Put, fmt.Sprintf("base/%05d", i), value)
	}
	for i := range 200 {
		put(ctx, t, users.Put, fmt.Sprintf("u%04d", i), []byte(fmt.Sprint(i)))
	}
	if err := cl.PutTTL(ctx, []byte("ttl/hour"), value, time.Hour); err != nil {
		t.Fatal(err)
	}
	cache := hashedKeySpace(ctx, t, cl, "cache", 50)
	bk := bank{accounts: 20, opening: 1000}
	bk.open(ctx, t, cl)

	// Writers: counters that only grow, and new keys, all through the
	// backup; each acknowledged write is noted with when it was.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	acked := make([][]ackedWrite, 6)
	for g := range acked[4:] {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if w, ok := bk.transfer(ctx, cl, g, i); ok {
					acked[4+g] = append(acked[4+g], w)
				}
			}
		})
	}
	for g := range acked[:4] {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				ctr, k := fmt.Sprintf("ctr/%d/%d", g, i%10), fmt.Sprintf("new/%d/%06d", g, i)
				if cl.Put(ctx, []byte(ctr), []byte(fmt.Sprintf("%08d", i))) != nil {
					continue
				}
				acked[g] = append(acked[g], ackedWrite{ctr, fmt.Sprintf("%08d", i), time.Now()})
				if cl.Put(ctx, []byte(k), value) == nil {
					acked[g] = append(acked[g], ackedWrite{k, string(value), time.Now()})
					writes.Add(1)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	dir := filepath.Join(t.TempDir(), "backup")
	began := time.Now()
	out, code, err := ctl(ctx, bin, src.Addr(2), "backup", dir, "--json")
	before := writes.Load()
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: exit %d, %v", code, err)
	}
	var sum struct {
		Timestamp string
		Pairs     int64
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ts, err := hlc.Parse(sum.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup: %s; %d writer rounds by its end, %d in all", out, before, writes.Load())

	// What the source held at ts, and that writers did change it after ts
	// (or the test would prove nothing).
	want := snapshot(ctx, t, cl, users, client.ReadAt(ts))
	latest := snapshot(ctx, t, cl, users, client.Linearizable())
	if maps.Equal(want[""], latest[""]) {
		t.Fatal("no write landed after the backup's timestamp: the load did not overlap the backup")
	}
	t.Logf("bank at the backup's timestamp: %d transfers", bk.check(t, want[""]))
	if n := int64(len(want[""]) + len(want["users"]) + len(cache)); n != sum.Pairs {
		t.Fatalf("backup holds %d pairs, a read at its timestamp %d", sum.Pairs, n)
	}

	dst := testcluster.Start(t, testcluster.Options{Nodes: 3})
	dcl := newClient(t, dst.Addrs())
	waitReplicated(ctx, t, dcl, 3)
	if _, code, err := ctl(ctx, bin, dst.Addr(1), "restore", dir); err != nil {
		t.Fatalf("restore: exit %d, %v", code, err)
	}
	dusers, err := dcl.KeySpace(ctx, "users")
	if err != nil {
		t.Fatal(err)
	}
	got := snapshot(ctx, t, dcl, dusers, client.Linearizable())
	for _, ks := range []string{"", "users"} {
		if !maps.Equal(got[ks], want[ks]) {
			t.Errorf("key space %q: restored %d keys, the source had %d at the backup timestamp; first difference: %s",
				ks, len(got[ks]), len(want[ks]), firstDiff(got[ks], want[ks]))
		}
	}
	bk.check(t, got[""])
	// Each write acknowledged before the backup began is restored: a new
	// key (or a transfer's marker) with its value, a counter at that value
	// or a later one (the values only grow and compare as strings).
	var early int
	for _, ws := range acked {
		for _, w := range ws {
			if !w.at.Before(began) {
				break // a writer's acknowledgements come in order
			}
			early++
			v, ok := got[""][w.key]
			if strings.HasPrefix(w.key, "ctr/") && ok && v >= w.value || !strings.HasPrefix(w.key, "ctr/") && ok && v == w.value {
				continue
			}
			t.Errorf("%q = %.20q was acknowledged %v before the backup began; restored: %.20q (present %v)", w.key, w.value, began.Sub(w.at), v, ok)
		}
	}
	t.Logf("%d writes acknowledged before the backup began, each checked in the restored cluster", early)
	if early == 0 {
		t.Fatal("no write was acknowledged before the backup began: the check proved nothing")
	}
	checkHashedKeySpace(ctx, t, dcl, "cache", cache)
	// The expiry comes back: the same instant, so a little under an hour.
	if ttl, err := dcl.TTL(ctx, []byte("ttl/hour")); err != nil || ttl <= 50*time.Minute || ttl > time.Hour {
		t.Errorf("restored ttl/hour has TTL %v (%v), want just under an hour", ttl, err)
	}
	_, code, err = ctl(ctx, bin, dst.Addr(1), "restore", dir)
	if code != 2 || err == nil || !strings.Contains(err.Error(), "restore refused: the cluster already holds data") {
		t.Fatalf("second restore: exit %d, %v", code, err)
	}
}

// bank is accounts bank/NN of the default key space, each opened with the
// same balance, between which transactions move money. Each transfer also
// writes its own marker key bank-tx/G/IIIIII = "from to amount", so the
// transfers a snapshot holds can be replayed.
type bank struct{ accounts, opening int }

func (b bank) account(i int) []byte { return fmt.Appendf(nil, "bank/%02d", i) }

func (b bank) open(ctx context.Context, t *testing.T, cl *client.Client) {
	for i := range b.accounts {
		put(ctx, t, cl.Put, string(b.account(i)), []byte(strconv.Itoa(b.opening)))
	}
}

// transfer is writer g's i-th transfer, one transaction; ok: it was
// acknowledged, and w is its marker.
func (b bank) transfer(ctx context.Context, cl *client.Client, g, i int) (w ackedWrite, ok bool) {
	from := (g*7 + i) % b.accounts
	to, amount := (from+1+i%(b.accounts-1))%b.accounts, 1+i%5
	w.key, w.value = fmt.Sprintf("bank-tx/%d/%06d", g, i), fmt.Sprintf("%d %d %d", from, to, amount)
	err := cl.Txn(ctx, func(tx *client.Tx) error {
		var bal [2]int
		for j, a := range []int{from, to} {
			v, err := tx.Get(ctx, b.account(a))
			if err != nil {
				return err
			}
			if bal[j], err = strconv.Atoi(string(v)); err != nil {
				return fmt.Errorf("account %d holds %q: %w", a, v, err)
			}
		}
		for _, p := range [][2][]byte{{b.account(from), []byte(strconv.Itoa(bal[0] - amount))},
			{b.account(to), []byte(strconv.Itoa(bal[1] + amount))}, {[]byte(w.key), []byte(w.value)}} {
			if err := tx.Put(ctx, p[0], p[1]); err != nil {
				return err
			}
		}
		return nil
	})
	w.at = time.Now()
	return w, err == nil
}

// check replays the transfer markers kv holds on the opening balances:
// each account must hold what that gives, so the total is the opening
// total. It returns how many transfers kv holds.
func (b bank) check(t *testing.T, kv map[string]string) (transfers int) {
	t.Helper()
	want := make([]int, b.accounts)
	for i := range want {
		want[i] = b.opening
	}
	for k, v := range kv {
		if !strings.HasPrefix(k, "bank-tx/") {
			continue
		}
		var from, to, amount int
		if _, err := fmt.Sscanf(v, "%d %d %d", &from, &to, &amount); err != nil {
			t.Fatalf("transfer %s = %q: %v", k, v, err)
		}
		want[from], want[to] = want[from]-amount, want[to]+amount
		transfers++
	}
	total := 0
	for i := range b.accounts {
		got, err := strconv.Atoi(kv[string(b.account(i))])
		if err != nil || got != want[i] {
			t.Errorf("account %d holds %q, the %d transfers held say %d", i, kv[string(b.account(i))], transfers, want[i])
		}
		total += got
	}
	if total != b.accounts*b.opening {
		t.Errorf("the bank's total is %d, want %d", total, b.accounts*b.opening)
	}
	return transfers
}

// ackedWrite is a write a writer saw acknowledged, and when.
type ackedWrite struct {
	key, value string
	at         time.Time
}

func put(ctx context.Context, t *testing.T, f func(context.Context, []byte, []byte) error, k string, v []byte) {
	t.Helper()
	if err := eventually(ctx, 10*time.Second, func(ctx context.Context) error { return f(ctx, []byte(k), v) }); err != nil {
		t.Fatal(err)
	}
}

// snapshot reads the default key space and users with ro.
func snapshot(ctx context.Context, t *testing.T, cl *client.Client, users *client.KeySpace, ro client.ReadOption) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for ks, scan := range map[string]func(context.Context, []byte, []byte, int, ...client.ReadOption) ([]client.KeyValue, error){"": cl.Scan, "users": users.Scan} {
		kvs, err := scan(ctx, nil, nil, 0, ro)
		if err != nil {
			t.Fatalf("scan %q: %v", ks, err)
		}
		out[ks] = map[string]string{}
		for _, kv := range kvs {
			out[ks][string(kv.Key)] = string(kv.Value)
		}
	}
	return out
}

func firstDiff(got, want map[string]string) string {
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return fmt.Sprintf("key %q: restored %.20q (present %v), want %.20q", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("key %q restored but absent at the backup timestamp", k)
		}
	}
	return "none"
}

// hashedKeySpace creates hashed key space name with n keys and returns them.
func hashedKeySpace(ctx context.Context, t *testing.T, cl *client.Client, name string, n int) map[string]string {
	t.Helper()
	if _, err := cl.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: name, Mode: "hashed"}); err != nil {
		t.Fatal(err)
	}
	ks, err := cl.KeySpace(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("c%03d", i), fmt.Sprint(i)
		put(ctx, t, ks.Put, k, []byte(v))
		want[k] = v
	}
	return want
}

// checkHashedKeySpace checks that hashed key space name holds exactly want.
func checkHashedKeySpace(ctx context.Context, t *testing.T, cl *client.Client, name string, want map[string]string) {
	t.Helper()
	ks, err := cl.KeySpace(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := ks.ScanHashOrder(ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if !maps.Equal(got, want) {
		t.Errorf("hashed key space %q: restored %d keys, want %d; first difference: %s", name, len(got), len(want), firstDiff(got, want))
	}
}
