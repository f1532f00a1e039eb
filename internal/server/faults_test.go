package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Fault injection is off unless asked for: a default node serves no
// /debug/faults, one with FaultInjection does.
func TestFaultInjectionOffByDefault(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := testConfig(t)
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.FaultInjection = on
		s, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post("http://"+s.HTTPAddr()+"/debug/faults/partition?peers=all", "", nil)
		if err != nil {
			s.Stop()
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.Stop()
		served := resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "partition=all")
		if served != on {
			t.Fatalf("FaultInjection=%v: POST /debug/faults/partition answered %s %.80q", on, resp.Status, body)
		}
	}
}
