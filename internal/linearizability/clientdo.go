package linearizability

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/client"
)

// ClassifyPut maps a Put error to an outcome. Puts are retried inside
// the client, so any failure may follow an attempt that was applied: only
// a request rejected as malformed certainly had no effect.
func ClassifyPut(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOk
	case errors.Is(err, client.ErrInvalidArgument):
		return OutcomeFailed
	}
	return OutcomeUnknown
}

// ClassifyCAS maps a CompareAndSet error to an outcome. The client never
// retries a CAS that may have reached a server and reports such an outcome
// as ErrAmbiguous (client/doc.go); it gives up with ErrUnavailable or
// ErrOverloaded only after attempts the cluster definitely refused, and
// never sends an invalid one. Anything else, context errors included, is
// treated as unknown.
func ClassifyCAS(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOk
	case errors.Is(err, client.ErrAmbiguous):
		return OutcomeUnknown
	case errors.Is(err, client.ErrInvalidArgument),
		errors.Is(err, client.ErrUnavailable),
		errors.Is(err, client.ErrOverloaded):
		return OutcomeFailed
	}
	return OutcomeUnknown
}

// OpTimeout bounds one workload operation.
const OpTimeout = 5 * time.Second

// ClientDo runs workload operations through cl, each bounded by
// OpTimeout (and ctx).
func ClientDo(ctx context.Context, cl *client.Client) Do {
	return func(in Input) Reply {
		octx, cancel := context.WithTimeout(ctx, OpTimeout)
		defer cancel()
		key := []byte(in.Key)
		switch in.Kind {
		case Get:
			v, err := cl.Get(octx, key)
			switch {
			case err == nil:
				return Reply{Output: Output{Found: true, Value: string(v)}}
			case errors.Is(err, client.ErrNotFound):
				return Reply{Output: Output{Found: false}}
			}
			// A read has no effect; it is dropped.
			return Reply{Outcome: OutcomeUnknown, Err: err}
		case Put:
			err := cl.Put(octx, key, []byte(in.Value))
			return Reply{Outcome: ClassifyPut(err), Err: err}
		case CAS:
			var exp *[]byte
			if in.ExpectExists {
				b := []byte(in.Expected)
				exp = &b
			}
			nv := []byte(in.Value)
			swapped, cur, curExists, err := cl.CompareAndSet(octx, key, exp, &nv)
			res := Reply{Outcome: ClassifyCAS(err), Output: Output{Swapped: swapped}, Err: err}
			if curExists {
				s := string(cur)
				res.Current = &s
			}
			return res
		}
		panic(fmt.Sprintf("linearizability workload: unexpected %s", in.Kind))
	}
}
