package keyspaces

import (
	"encoding/hex"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// A key space record written before miss handlers existed (the bytes of
// such a record) reads with its settings intact and no miss handler.
func TestKeySpaceRecordFromBeforeMissHandlers(t *testing.T) {
	old, _ := hex.DecodeString("0803120873657373696f6e731a0668617368656420012a06706562626c653080804038b0ea01")
	rec := &tidekvpb.KeySpaceRecord{}
	if err := proto.Unmarshal(old, rec); err != nil {
		t.Fatal(err)
	}
	cat := CatalogueOf([]*tidekvpb.KeySpaceRecord{rec})
	k, ok := cat.ByID(3)
	if !ok || k.Name != "sessions" || k.Mode != keyspace.Hashed || k.RF != 1 || k.CapacityPerNode != 1<<20 || k.TTL != 30*time.Second || k.MissHandler != "" {
		t.Fatalf("read %+v, %v", k, ok)
	}
}
