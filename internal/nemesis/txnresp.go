package nemesis

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/txncheck"
)

// respTxns runs transactions as a Redis user writes them, over the nodes'
// RESP listeners with go-redis. A list-append transaction is MULTI, a GET
// or an APPEND of "value," per mop, EXEC: the GETs' replies come back in
// EXEC's. A register transaction is check-and-set: WATCH the keys it
// reads, GET them, then MULTI, SET each write, EXEC (a PING when it
// writes nothing, so that EXEC still checks the watches); EXEC's null
// reply means a watched key changed and nothing was applied.
//
// Process p starts on node p mod the nodes and moves to the next node
// after an error that is not a reply (its node may be down).
type respTxns struct {
	kind  txncheck.Workload
	nodes []*redis.Client
	at    []int // per process: the index of its node; each process uses only its own
}

func newRespTxns(kind txncheck.Workload, addrs []string, processes int) *respTxns {
	r := &respTxns{kind: kind, at: make([]int, processes)}
	for _, a := range addrs {
		// No retries: go-redis would send a command again after a lost
		// answer, and an EXEC sent twice is not one transaction.
		r.nodes = append(r.nodes, redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1}))
	}
	for p := range r.at {
		r.at[p] = p % len(addrs)
	}
	return r
}

func (r *respTxns) Close() error {
	var errs []error
	for _, n := range r.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// readsFirst: a register transaction reads under WATCH before MULTI.
func (r *respTxns) readsFirst() bool { return r.kind == txncheck.Register }

func (r *respTxns) runTxn(ctx context.Context, process int, mops []txncheck.Mop) ([]txncheck.Mop, txncheck.Outcome, error) {
	rc := r.nodes[r.at[process]]
	var done []txncheck.Mop
	var sent bool
	var err error
	if r.kind == txncheck.ListAppend {
		done, sent, err = listTxn(ctx, rc, mops)
	} else {
		done, sent, err = registerTxn(ctx, rc, mops)
	}
	var reply redis.Error
	if err != nil && !errors.As(err, &reply) {
		r.at[process] = (r.at[process] + 1) % len(r.nodes)
	}
	return done, respOutcome(err, sent), err
}

// respOutcome is how a transaction ended: committed; certainly not, if
// EXEC was never sent, EXEC answered null (a watched key changed) or
// EXECABORT (a command was refused while queuing); otherwise unknown (an
// error reply of EXEC, such as a timeout, may come after the commit).
func respOutcome(err error, sent bool) txncheck.Outcome {
	switch {
	case err == nil:
		return txncheck.OK
	case !sent || errors.Is(err, redis.TxFailedErr) || strings.HasPrefix(err.Error(), "EXECABORT"):
		return txncheck.Fail
	}
	return txncheck.Info
}

// listTxn runs mops in MULTI/EXEC: reads as GET, appends as APPEND.
func listTxn(ctx context.Context, rc *redis.Client, mops []txncheck.Mop) ([]txncheck.Mop, bool, error) {
	done := append([]txncheck.Mop(nil), mops...)
	gets := make([]*redis.StringCmd, len(mops))
	_, err := rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range mops {
			if m.F == txncheck.Append {
				p.Append(ctx, m.Key, strconv.Itoa(m.Value)+",")
			} else {
				gets[i] = p.Get(ctx, m.Key)
			}
		}
		return nil
	})
	if err == nil {
		for i, g := range gets {
			if g == nil {
				continue
			}
			v, gerr := g.Result()
			if gerr != nil && !errors.Is(gerr, redis.Nil) {
				return done, true, gerr
			}
			if done[i].List, err = decodeList([]byte(v)); err != nil {
				return done, true, err
			}
		}
	}
	return done, true, err
}

// registerTxn runs mops, reads first (txnWorkload.run orders them so), as
// WATCH and GET of the keys read, then MULTI, SET of each write, EXEC.
// sent says whether EXEC went out.
func registerTxn(ctx context.Context, rc *redis.Client, mops []txncheck.Mop) ([]txncheck.Mop, bool, error) {
	done := append([]txncheck.Mop(nil), mops...)
	var watched []string
	for _, m := range mops {
		if m.F == txncheck.Read {
			watched = append(watched, m.Key)
		}
	}
	sent := false
	fn := func(tx *redis.Tx) error {
		for i, m := range done {
			if m.F != txncheck.Read {
				continue
			}
			v, err := tx.Get(ctx, m.Key).Result()
			switch {
			case errors.Is(err, redis.Nil): // unset: Value stays 0
			case err != nil:
				return err
			default:
				if done[i].Value, err = strconv.Atoi(v); err != nil {
					return err
				}
			}
		}
		sent = true
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			wrote := false
			for _, m := range done {
				if m.F == txncheck.Write {
					p.Set(ctx, m.Key, strconv.Itoa(m.Value), 0)
					wrote = true
				}
			}
			if !wrote {
				p.Ping(ctx)
			}
			return nil
		})
		return err
	}
	err := rc.Watch(ctx, fn, watched...) // no keys: no WATCH
	return done, sent, err
}
