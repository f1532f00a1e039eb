package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FormatVersion is the on-disk format this binary writes and reads: the
// engine's key layout and the encodings of what it stores. A change that
// an older binary would misread bumps it.
const FormatVersion = 1

// formatFile names the file in a node's data directory that records the
// format version.
const formatFile = "FORMAT"

// CheckFormat makes sure dir holds data this binary can read, before
// anything opens it: a new directory (or one written before the version
// was recorded, which is format 1) gets the current version; an unknown,
// newer or unreadable version is refused with one sentence, and nothing
// in the directory is touched.
func CheckFormat(dir string) error {
	path := filepath.Join(dir, formatFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return writeFormat(path)
	}
	if err != nil {
		return fmt.Errorf("data directory %s: cannot read its format version: %w", dir, err)
	}
	text := strings.TrimSpace(string(b))
	v, err := strconv.Atoi(strings.TrimPrefix(text, "tidekv-format "))
	switch {
	case err != nil || !strings.HasPrefix(text, "tidekv-format "):
		return fmt.Errorf("data directory %s has an unrecognised format file (%q): it was not written by TideKV", dir, text)
	case v > FormatVersion:
		return fmt.Errorf("data directory %s was written by a newer TideKV (format %d; this binary reads format %d): use a newer binary", dir, v, FormatVersion)
	case v < 1:
		return fmt.Errorf("data directory %s has an invalid format version %d", dir, v)
	}
	return nil
}

// writeFormat records the current version atomically (write, sync,
// rename), so a crash never leaves a half-written file.
func writeFormat(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "tidekv-format %d\n", FormatVersion); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
