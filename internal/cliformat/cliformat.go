// Package cliformat renders `tidekv ctl` output: keys and values for
// terminals, status and range tables, and JSON for scripts. It keeps the
// command file down to flag parsing and calls.
package cliformat

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Quote renders a key or value for a terminal: as is when it is non-empty,
// printable UTF-8, else Go-quoted. Text that starts with a quote or '<' is
// quoted too, so that quoted output and the <min>/<max> bounds cannot be
// mistaken for a literal key.
func Quote(b []byte) string {
	if len(b) == 0 || b[0] == '"' || b[0] == '<' || !utf8.Valid(b) {
		return strconv.Quote(string(b))
	}
	for _, r := range string(b) {
		if !strconv.IsPrint(r) {
			return strconv.Quote(string(b))
		}
	}
	return string(b)
}

// Bound renders a range boundary; the empty key means the start or end of
// the key space.
func Bound(b []byte, isEnd bool) string {
	if len(b) == 0 {
		if isEnd {
			return "<max>"
		}
		return "<min>"
	}
	return Quote(b)
}

// Ago renders "seconds since" as a short duration: 350ms ago, 12s ago.
func Ago(seconds float64) string {
	if seconds < 0 {
		return "-"
	}
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Second:
		d = d.Round(time.Millisecond)
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	return d.String() + " ago"
}

// ReplicaList renders a descriptor's replicas as n1(v),n2(v),n3(l), with
// the leaseholder marked by a trailing '*'. Types: v voter, l learner,
// vi/vo voter joining/leaving during a replica change.
func ReplicaList(d *tidekvpb.RangeDescriptor, leader uint64) string {
	parts := make([]string, 0, len(d.GetReplicas()))
	for _, r := range d.GetReplicas() {
		s := fmt.Sprintf("n%d(%s)", r.GetNodeId(), replicaType(r.GetType()))
		if leader != 0 && r.GetNodeId() == leader {
			s += "*"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

func replicaType(t tidekvpb.ReplicaType) string {
	switch t {
	case tidekvpb.ReplicaType_VOTER:
		return "v"
	case tidekvpb.ReplicaType_LEARNER:
		return "l"
	case tidekvpb.ReplicaType_VOTER_INCOMING:
		return "vi"
	case tidekvpb.ReplicaType_VOTER_OUTGOING:
		return "vo"
	}
	return strconv.Itoa(int(t))
}

// RangesTable writes the ranges of a Ranges answer in key order.
func RangesTable(w io.Writer, resp *tidekvpb.RangesResponse) error {
	ranges := sortedRanges(resp)
	if err := DescriptorTable(w, ranges...); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, plural(len(ranges), "range"))
	return err
}

func sortedRanges(resp *tidekvpb.RangesResponse) []*tidekvpb.RangeInfo {
	ranges := append([]*tidekvpb.RangeInfo(nil), resp.GetRanges()...)
	sort.Slice(ranges, func(i, j int) bool {
		return bytes.Compare(ranges[i].GetDesc().GetStartKey(), ranges[j].GetDesc().GetStartKey()) < 0
	})
	return ranges
}

// DescriptorTable writes one row per range.
func DescriptorTable(w io.Writer, ranges ...*tidekvpb.RangeInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RANGE\tSTART\tEND\tGEN\tREPLICAS")
	for _, r := range ranges {
		d := r.GetDesc()
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", d.GetRangeId(), Bound(d.GetStartKey(), false),
			Bound(d.GetEndKey(), true), d.GetGeneration(), ReplicaList(d, r.GetLeaderNodeId()))
	}
	return tw.Flush()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// KV is a key and its value, for ScanLines and ScanJSON.
type KV struct{ Key, Value []byte }

// ScanLines writes key<TAB>value lines, then the count.
func ScanLines(w io.Writer, kvs []KV) error {
	var b strings.Builder
	for _, kv := range kvs {
		b.WriteString(Quote(kv.Key))
		b.WriteByte('\t')
		b.WriteString(Quote(kv.Value))
		b.WriteByte('\n')
	}
	b.WriteString(plural(len(kvs), "key"))
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// Object builds a JSON object with fields in insertion order, which keeps
// output stable and readable.
type Object struct {
	keys []string
	vals []json.RawMessage
}

// Set adds a field holding any JSON-encodable value.
func (o *Object) Set(name string, v any) *Object {
	raw, err := marshal(v, "")
	if err != nil {
		raw, _ = marshal(err.Error(), "")
	}
	o.keys = append(o.keys, name)
	o.vals = append(o.vals, raw)
	return o
}

// marshal is json.Marshal without HTML escaping: keys such as "<a&b>" should
// read as they are.
func marshal(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// SetBytes adds a key or value: as a string under name when it is valid
// UTF-8, else base64 under name+"_base64", so that text stays readable and
// binary data stays exact.
func (o *Object) SetBytes(name string, b []byte) *Object {
	if utf8.Valid(b) {
		return o.Set(name, string(b))
	}
	return o.Set(name+"_base64", base64.StdEncoding.EncodeToString(b))
}

// MarshalJSON implements json.Marshaler.
func (o *Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := marshal(k, "")
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[i])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// GetJSON is the --json answer of get: {"key":..,"value":..,"found":..}, with
// value null when the key is missing.
func GetJSON(key, value []byte, found bool) *Object {
	o := (&Object{}).SetBytes("key", key)
	if found {
		o.SetBytes("value", value)
	} else {
		o.Set("value", nil)
	}
	return o.Set("found", found)
}

// ScanJSON is the --json answer of scan: {"kvs":[{"key":..,"value":..}],"count":N}.
func ScanJSON(kvs []KV) *Object {
	list := make([]*Object, len(kvs))
	for i, kv := range kvs {
		list[i] = (&Object{}).SetBytes("key", kv.Key).SetBytes("value", kv.Value)
	}
	return (&Object{}).Set("kvs", list).Set("count", len(kvs))
}

// WriteJSON writes v as indented JSON and a newline. Protocol buffer messages
// go through protojson (proto field names, zero values included) so that
// every field is present for scripts.
func WriteJSON(w io.Writer, v any) error {
	var (
		out []byte
		err error
	)
	if m, ok := v.(proto.Message); ok {
		out, err = protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	} else {
		out, err = marshal(v, "  ")
	}
	if err != nil {
		return err
	}
	out = append(out, '\n')
	_, err = w.Write(out)
	return err
}
