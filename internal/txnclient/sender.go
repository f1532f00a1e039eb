package txnclient

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/txn"
)

// Sender is a txn.Sender over a client.Client, made on first use: the
// node's own address, which it routes through, answers before the node
// has joined its cluster.
type Sender struct {
	node func() Node
	once sync.Once
	c    *client.Client
	err  error
}

var _ txn.Sender = (*Sender)(nil)

// Node is the node a Sender routes from: its gRPC address, locality and
// the TLS it dials its peers with (nil: insecure).
type Node struct {
	Addr, Locality string
	TLS            *tls.Config
}

// New returns a Sender whose client routes from the node that node names
// when the Sender is first used.
func New(node func() Node) *Sender { return &Sender{node: node} }

func (s *Sender) client() (*client.Client, error) {
	s.once.Do(func() {
		n := s.node()
		cfg := client.DefaultConfig()
		cfg.Addrs, cfg.Locality, cfg.TLS = []string{n.Addr}, n.Locality, n.TLS
		s.c, s.err = client.New(cfg)
	})
	return s.c, s.err
}

// Close closes the client if one was made; none is made after.
func (s *Sender) Close() {
	s.once.Do(func() { s.err = client.ErrClosed })
	if s.c != nil {
		s.c.Close()
	}
}

func (s *Sender) Get(ctx context.Context, key []byte, at txn.ReadAt) (txn.Value, error) {
	c, err := s.client()
	if err != nil {
		return txn.Value{}, err
	}
	v, err := c.GetVersion(ctx, key, client.TxnReadAt(at.Timestamp, at.Txn, at.Limit))
	return txn.Value{Value: v.Value, Found: v.Found, TTL: v.TTL, Version: v.Version}, mark(err)
}

func (s *Sender) Scan(ctx context.Context, start, end []byte, limit int, at txn.ReadAt) ([]txn.KeyValue, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	kvs, err := c.Scan(ctx, start, end, limit, client.TxnReadAt(at.Timestamp, at.Txn, at.Limit))
	if err != nil {
		return nil, mark(err)
	}
	out := make([]txn.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = txn.KeyValue{Key: kv.Key, Value: kv.Value}
	}
	return out, nil
}

func (s *Sender) RefreshReads(ctx context.Context, txnID []byte, keys [][]byte, from, to hlc.Timestamp) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	return mark(c.RefreshReads(ctx, txnID, keys, from, to))
}

func (s *Sender) RefreshSpans(ctx context.Context, txnID []byte, spans []*tidekvpb.KeySpan, from, to hlc.Timestamp) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	return mark(c.RefreshSpans(ctx, txnID, spans, from, to))
}

func (s *Sender) CommitOnePhase(ctx context.Context, txnID []byte, readTS hlc.Timestamp, reads [][]byte, scans []*tidekvpb.KeySpan, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	c, err := s.client()
	if err != nil {
		return hlc.Timestamp{}, err
	}
	ts, err := c.CommitOnePhase(ctx, txnID, readTS, reads, scans, ops)
	return ts, mark(err)
}

func (s *Sender) WriteIntents(ctx context.Context, t *tidekvpb.TxnKey, writeTS hlc.Timestamp, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	c, err := s.client()
	if err != nil {
		return hlc.Timestamp{}, err
	}
	ts, err := c.WriteIntents(ctx, t, writeTS, ops)
	return ts, mark(err)
}

func (s *Sender) TxnRecord(ctx context.Context, req *tidekvpb.TxnRecordRequest) (*tidekvpb.TxnRecordResponse, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	rec, err := c.TxnRecord(ctx, req)
	return rec, mark(err)
}

func (s *Sender) ResolveIntents(ctx context.Context, t *tidekvpb.TxnKey, keys [][]byte, commit bool, commitTS hlc.Timestamp) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	return mark(c.ResolveIntents(ctx, t, keys, commit, commitTS))
}

// mark gives an SDK error the coordinator's kind, if it has one.
func mark(err error) error {
	var ue *client.UncertainReadError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ue):
		return &txn.UncertainReadError{Timestamp: ue.Timestamp, Err: err}
	case errors.Is(err, client.ErrTxnRetry):
		return txn.Mark(err, txn.ErrRetry)
	case errors.Is(err, client.ErrTxnCommitted):
		return txn.Mark(err, txn.ErrCommitted)
	case errors.Is(err, client.ErrNotOneRange):
		return txn.Mark(err, txn.ErrNotOneRange)
	}
	return err
}
