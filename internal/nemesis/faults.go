package nemesis

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// FaultEndpoint reaches the fault-injection endpoints (/debug/faults) of
// nodes started with --enable-fault-injection, on their HTTP addresses.
type FaultEndpoint struct {
	http   *http.Client
	scheme string
}

// NewFaultEndpoint returns an endpoint client that speaks HTTPS with tc
// when it is set: a node started with --certs-dir serves its HTTP port
// over TLS only, and answers plain HTTP with 400. Nil speaks plain HTTP.
//
// Each fault goes on a fresh connection: a kept-alive one that the node
// closed as idle (its HTTP read timeout) while a fault was being posted
// on it failed a chaos schedule with "connection reset by peer".
func NewFaultEndpoint(tc *tls.Config) FaultEndpoint {
	tr := &http.Transport{DisableKeepAlives: true}
	f := FaultEndpoint{http: &http.Client{Timeout: 5 * time.Second, Transport: tr}, scheme: "http://"}
	if tc != nil {
		tr.TLSClientConfig = tc
		f.scheme = "https://"
	}
	return f
}

// FailDisk asks the node serving HTTP at httpAddr to fail every write of
// its engine.
func (f FaultEndpoint) FailDisk(httpAddr string) error {
	return f.post(httpAddr, "disk?fail=true")
}

// SetPartition asks the node serving HTTP at httpAddr to cut its Raft
// traffic with peers: "all", "none" (heal) or node IDs like "2,3".
func (f FaultEndpoint) SetPartition(httpAddr, peers string) error {
	return f.post(httpAddr, "partition?peers="+url.QueryEscape(peers))
}

func (f FaultEndpoint) post(httpAddr, what string) error {
	resp, err := f.http.Post(f.scheme+httpAddr+"/debug/faults/"+what, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fault %s at %s: %s: %s", what, httpAddr, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
