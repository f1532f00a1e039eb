// Package redisserver starts a real redis-server for tests that compare
// TideKV's Redis protocol with Redis's own behaviour, or benchmark against
// it. It imports only the standard library.
package redisserver

import (
	"bufio"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Start starts an unreplicated redis-server without persistence on a free
// loopback port for the test's life and returns its address; "" when
// redis-server is not installed (the caller skips or leaves the comparison
// out, saying so).
func Start(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return ""
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + port
	for start := time.Now(); !answers(addr); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			tb.Fatal("redis-server did not answer PING within 10s")
		}
	}
	return addr
}

// answers reports whether addr answers PING with PONG.
func answers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}
