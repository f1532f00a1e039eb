package security

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// GossipKey is the certs directory's gossip key file: one base64 AES-256
// key per line, every node's copy the same. The first line encrypts gossip;
// every line decrypts, so a new key can be accepted everywhere before any
// node encrypts with it (docs/security.md, "Gossip").
const GossipKey = "gossip.key"

// gossipKeyLen makes gossip AES-256-GCM.
const gossipKeyLen = 32

// CreateGossipKey writes a new random key to Dir/gossip.key or, with add,
// appends it to the existing file, accepted beside the keys there.
func CreateGossipKey(o CertOptions, add bool) error {
	key := make([]byte, gossipKeyLen)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	line := []byte(base64.StdEncoding.EncodeToString(key) + "\n")
	p := o.path(GossipKey)
	if !add {
		if err := o.checkFree(p); err != nil {
			return err
		}
		return o.Files.WriteFile(p, line, 0o600, o.Overwrite)
	}
	old, err := o.Files.ReadFile(p)
	if err != nil {
		return fmt.Errorf("--add appends to an existing %s: %w", p, err)
	}
	if _, err := parseGossipKeys(p, old); err != nil {
		return err
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	return o.Files.WriteFile(p, append(old, line...), 0o600, true)
}

// LoadGossipKeys reads dir's gossip.key: its keys, the first the one that
// encrypts.
func LoadGossipKeys(f Files, dir string) ([][]byte, error) {
	p := filepath.Join(dir, GossipKey)
	b, err := f.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("gossip is on and %s does not exist: create it with `tidekv cert create-gossip-key --certs-dir %s` and give every node the same copy", p, dir)
	}
	if err != nil {
		return nil, err
	}
	return parseGossipKeys(p, b)
}

func parseGossipKeys(path string, b []byte) ([][]byte, error) {
	var keys [][]byte
	for i, line := range bytes.Split(b, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(k) != gossipKeyLen {
			return nil, fmt.Errorf("%s line %d is not a base64 %d-byte key", path, i+1, gossipKeyLen)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no key", path)
	}
	return keys, nil
}
