package storage_test

import (
	"testing"

	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

// The conformance suite over both engine kinds, each refusing the other's
// SST files: it is what keeps the MemEngine an honest stand-in for Pebble.
func TestConformance(t *testing.T) {
	t.Run("pebble", func(t *testing.T) { enginetest.Run(t, enginetest.Pebble, enginetest.Mem) })
	t.Run("mem", func(t *testing.T) { enginetest.Run(t, enginetest.Mem, enginetest.Pebble) })
}

func TestEnginesAgree(t *testing.T) {
	enginetest.Agree(t, enginetest.Pebble, enginetest.Mem)
}

func b(s string) []byte { return []byte(s) }
