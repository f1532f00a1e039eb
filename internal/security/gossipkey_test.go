package security

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A gossip key file is created 0600 and not replaced; --add appends a key
// that decrypts while the first still encrypts; a missing or damaged file
// is refused in a sentence.
func TestGossipKeyFile(t *testing.T) {
	o := CertOptions{Dir: t.TempDir(), Lifetime: time.Hour, Files: OSFiles{}}
	if _, err := LoadGossipKeys(o.Files, o.Dir); err == nil || !strings.Contains(err.Error(), "tidekv cert create-gossip-key") {
		t.Fatalf("missing key file: %v", err)
	}
	if err := CreateGossipKey(o, false); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(o.Dir, GossipKey)
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v, want 0600", p, err, st.Mode())
	}
	first, err := LoadGossipKeys(o.Files, o.Dir)
	if err != nil || len(first) != 1 || len(first[0]) != 32 {
		t.Fatalf("keys %x, %v", first, err)
	}
	if err := CreateGossipKey(o, false); err == nil || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("second create: %v", err)
	}
	if err := CreateGossipKey(o, true); err != nil {
		t.Fatal(err)
	}
	both, err := LoadGossipKeys(o.Files, o.Dir)
	if err != nil || len(both) != 2 || !bytes.Equal(both[0], first[0]) || bytes.Equal(both[1], first[0]) {
		t.Fatalf("after --add: %x, %v; want the old key first, then a new one", both, err)
	}
	if err := os.WriteFile(p, []byte("not base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadGossipKeys(o.Files, o.Dir); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("damaged key file: %v", err)
	}
}
