package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// OriginError is a miss handler's failure: it answered neither 200 nor
// 404, could not be reached, or did not answer in time.
type OriginError struct {
	Origin string
	Err    error
}

func (e *OriginError) Error() string {
	return fmt.Sprintf("read-through: miss handler %s: %v", e.Origin, e.Err)
}

func (e *OriginError) Unwrap() error { return e.Err }

// Fetch asks a key space's miss handler for a key it misses: GET
// origin?key=<key, URL-encoded>. 200 answers the value (its body, at most
// maxValue bytes); 404 says the origin has no such key (found false);
// anything else is an *OriginError.
func Fetch(ctx context.Context, client *http.Client, origin string, key []byte, maxValue int) ([]byte, bool, error) {
	fail := func(err error) ([]byte, bool, error) { return nil, false, &OriginError{Origin: origin, Err: err} }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"?key="+url.QueryEscape(string(key)), nil)
	if err != nil {
		return fail(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fail(errors.New("no answer within the miss handler timeout"))
		}
		return fail(err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, false, nil
	default:
		return fail(fmt.Errorf("answered %s (want 200 with the value, or 404)", resp.Status))
	}
	v, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxValue)+1))
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fail(errors.New("no whole answer within the miss handler timeout"))
	case err != nil:
		return fail(err)
	case len(v) > maxValue:
		return fail(fmt.Errorf("answered a value over the %d-byte maximum value size", maxValue))
	}
	return v, true, nil
}
