package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/narad-io/storage/internal/testmem"
)

// leasedGroup is a consume answer's group with its records, as the tests
// write and read them.
type leasedGroup struct {
	head    ConsumeGroup
	records []BatchRecord
}

// appendConsumed is a consume answer of groups, as ConsumeBatchWriter
// writes it.
func appendConsumed(b []byte, groups []leasedGroup) []byte {
	buf := bytes.NewBuffer(b)
	cw := NewConsumeBatchWriter(buf)
	for _, g := range groups {
		cw.Group(g.head)
		for _, r := range g.records {
			cw.Record(r)
		}
	}
	return buf.Bytes()
}

func readConsumed(answer []byte) ([]leasedGroup, error) {
	return readConsumedFrom(bytes.NewReader(answer), false)
}

// readConsumedFrom reads an answer into its groups: a record goes into a
// new group when its head's index moved on, which readConsumedFrom sees
// as a head that differs from the last or a last group full.
func readConsumedFrom(r io.Reader, pack bool) ([]leasedGroup, error) {
	cr := NewConsumeBatchReader(r, maxLen)
	if pack {
		cr.PackSmall()
	}
	var out []leasedGroup
	for {
		g, rec, err := cr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || len(out[n-1].records) == out[n-1].head.Records {
			out = append(out, leasedGroup{head: g})
		} else if out[n-1].head != g {
			return nil, fmt.Errorf("record %d of a group: its head %+v, the group's %+v", len(out[n-1].records), g, out[n-1].head)
		}
		out[len(out)-1].records = append(out[len(out)-1].records, rec)
	}
}

func sameGroups(a, b []leasedGroup) bool {
	return slices.EqualFunc(a, b, func(x, y leasedGroup) bool {
		return x.head == y.head && slices.EqualFunc(x.records, y.records, func(r, s BatchRecord) bool {
			return r.Offset == s.Offset && r.CommittedAtMs == s.CommittedAtMs && bytes.Equal(r.Key, s.Key) && bytes.Equal(r.Value, s.Value)
		})
	})
}

// someGroups is an answer of three partitions' leases: a record with an
// empty key and value, offsets out of order (a redelivery before new
// records), a large value.
func someGroups() []leasedGroup {
	return []leasedGroup{
		{ConsumeGroup{Partition: 2, LeaseID: 7, LeaseDeadlineMs: 1_700_000_030_000, Records: 3}, []BatchRecord{
			{Offset: 9, CommittedAtMs: 1_700_000_000_001, Key: []byte("k"), Value: []byte("first")},
			{Offset: 4, CommittedAtMs: 1_700_000_000_000, Key: []byte{}, Value: []byte{}},
			{Offset: 10, CommittedAtMs: 1_700_000_000_002, Key: []byte{}, Value: bytes.Repeat([]byte{0xff}, 100<<10)},
		}},
		{ConsumeGroup{Partition: 0, LeaseID: 1 << 63, LeaseDeadlineMs: 1_700_000_031_000, Records: 1}, []BatchRecord{
			{Offset: 0, CommittedAtMs: 1_700_000_000_003, Key: []byte("\x00\x01"), Value: []byte("\n\"")},
		}},
		{ConsumeGroup{Partition: 99_999, LeaseID: 0, LeaseDeadlineMs: -1, Records: 2}, []BatchRecord{
			{Offset: 1 << 40, CommittedAtMs: 5, Key: []byte{}, Value: []byte("a")},
			{Offset: 1<<40 + 1, CommittedAtMs: 5, Key: []byte("b"), Value: []byte{}},
		}},
	}
}

// TestConsumeBatch_RoundTrip: groups of several partitions, with empty
// keys and values (empty, never nil), come back as written, packed or
// not, in small reads or whole; an answer that leased nothing is empty
// and reads as no record.
func TestConsumeBatch_RoundTrip(t *testing.T) {
	groups := someGroups()
	answer := appendConsumed(nil, groups)
	for _, pack := range []bool{false, true} {
		for _, r := range []io.Reader{bytes.NewReader(answer), iotest.OneByteReader(bytes.NewReader(answer))} {
			got, err := readConsumedFrom(r, pack)
			if err != nil || !sameGroups(got, groups) {
				t.Fatalf("pack %v: %v; read %+v", pack, err, got)
			}
			for _, g := range got {
				for _, rec := range g.records {
					if rec.Key == nil || rec.Value == nil {
						t.Fatalf("pack %v: partition %d offset %d: nil key or value", pack, g.head.Partition, rec.Offset)
					}
				}
			}
		}
	}
	if empty := appendConsumed(nil, nil); len(empty) != 0 {
		t.Fatalf("an answer of no groups is %d bytes", len(empty))
	}
	if got, err := readConsumed(nil); err != nil || len(got) != 0 {
		t.Fatalf("an empty answer: %v, %d groups", err, len(got))
	}
}

// TestConsumeBatch_TheDocumentedBytes: a group is partition (uint32),
// lease id (uint64), deadline (int64) and record count (uint32),
// big-endian, then its records as a fetch answer's (docs/http-api.md).
func TestConsumeBatch_TheDocumentedBytes(t *testing.T) {
	rec := BatchRecord{Offset: 0x0102, CommittedAtMs: 3, Key: []byte("k"), Value: []byte("v")}
	answer := appendConsumed(nil, []leasedGroup{{ConsumeGroup{Partition: 5, LeaseID: 0x0a0b, LeaseDeadlineMs: -2, Records: 1}, []BatchRecord{rec}}})
	want := slices.Concat(
		[]byte{0, 0, 0, 5},
		[]byte{0, 0, 0, 0, 0, 0, 0x0a, 0x0b},
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe},
		[]byte{0, 0, 0, 1},
		appendFetched(nil, []BatchRecord{rec}))
	if !bytes.Equal(answer, want) || ConsumeGroupHeadSize != 24 {
		t.Fatalf("consume answer %x, want %x", answer, want)
	}
}

// groupHead is a group's head bytes.
func groupHead(p, leaseID uint64, deadline int64, n uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(p))
	b = binary.BigEndian.AppendUint64(b, leaseID)
	b = binary.BigEndian.AppendUint64(b, uint64(deadline))
	return binary.BigEndian.AppendUint32(b, n)
}

// TestConsumeBatchReader_SaysWhatIsWrong: a cut or oversized answer is
// refused naming its group (index and partition) and its record (index
// in the group), and an error of the body itself comes through.
func TestConsumeBatchReader_SaysWhatIsWrong(t *testing.T) {
	one := appendConsumed(nil, []leasedGroup{{ConsumeGroup{Partition: 3, LeaseID: 1, Records: 1}, []BatchRecord{{Offset: 1, Value: []byte("v")}}}})
	rec := appendFetched(nil, []BatchRecord{{Offset: 2, Value: []byte("value")}})
	bodyErr := errors.New("the body's own error")
	for _, tc := range []struct {
		name string
		body io.Reader
		want string
	}{
		{"cut inside a head", bytes.NewReader(slices.Concat(one, groupHead(4, 1, 0, 2)[:10])), "group 1: the body ends 10 bytes into its 24-byte head"},
		{"fewer records than the count", bytes.NewReader(slices.Concat(one, groupHead(4, 1, 0, 2), rec)), "group 1 (partition 4): record 1: the body ends before it (the group holds 2)"},
		{"cut inside a value", bytes.NewReader(slices.Concat(one, groupHead(4, 1, 0, 2), rec, rec[:len(rec)-2])), "group 1 (partition 4): record 1: value: the body ends 3 bytes into its 5"},
		{"cut inside a record's offset", bytes.NewReader(slices.Concat(groupHead(4, 1, 0, 1), rec[:7])), "group 0 (partition 4): record 0: the body ends inside its offset and commit time"},
		{"a value over the bound", bytes.NewReader(slices.Concat(groupHead(4, 1, 0, 1), make([]byte, 17), binary.AppendUvarint(nil, maxLen+1))), "group 0 (partition 4): record 0: value: length 67108865 over the 67108864-byte record bound"},
		{"a group of no records", bytes.NewReader(slices.Concat(one, groupHead(4, 1, 0, 0))), "group 1 (partition 4): 0 records; a group holds at least 1, and an answer at most 10000 in all (1 before it)"},
		{"a count over the bound", bytes.NewReader(groupHead(4, 1, 0, MaxConsumeRecords+1)), "group 0 (partition 4): 10001 records; a group holds at least 1, and an answer at most 10000 in all (0 before it)"},
		{"counts over the bound in all", bytes.NewReader(slices.Concat(one, groupHead(4, 1, 0, MaxConsumeRecords))), "group 1 (partition 4): 10000 records; a group holds at least 1, and an answer at most 10000 in all (1 before it)"},
		{"a partition past int32", bytes.NewReader(groupHead(1<<31, 1, 0, 1)), "group 0: partition 2147483648 over 2147483647"},
		{"the body's error", io.MultiReader(bytes.NewReader(one), failing{bodyErr}), "group 1: " + bodyErr.Error()},
	} {
		cr := NewConsumeBatchReader(tc.body, maxLen)
		var err error
		for err == nil {
			_, _, err = cr.Next()
		}
		if err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.name == "the body's error" && !errors.Is(err, bodyErr) {
			t.Errorf("%s: %v does not wrap the body's error", tc.name, err)
		}
	}
}

// TestConsumeBatchReader_AllocatesAboutWhatTheBodyHolds: a head claiming
// the most records and a value of the bound, in a few bytes, fails at the
// body's end having allocated little: neither the count nor a length is
// allocated ahead of the bytes.
func TestConsumeBatchReader_AllocatesAboutWhatTheBodyHolds(t *testing.T) {
	cut := slices.Concat(groupHead(1, 1, 0, MaxConsumeRecords), make([]byte, 17), binary.AppendUvarint(nil, maxLen), []byte("only this"))
	var err error
	if got := testmem.Allocated(func() { _, err = readConsumed(cut) }); err == nil || got > 1<<20 {
		t.Fatalf("a %d-byte answer claiming %d records and a %d-byte value: %v, allocated %d bytes", len(cut), MaxConsumeRecords, maxLen, err, got)
	}
}

// FuzzDecodeConsumed: whatever a server answers a consume, the reader
// returns an error or groups that hold no more than the answer did, at
// most MaxConsumeRecords records, and encode back into an answer that
// decodes to the same groups; packed or not, the same.
func FuzzDecodeConsumed(f *testing.F) {
	f.Add(appendConsumed(nil, someGroups()[1:]))
	f.Add([]byte{})
	f.Add(groupHead(1, 2, 3, 1)[:20])
	f.Add(slices.Concat(groupHead(1, 2, 3, 2), make([]byte, 16), binary.AppendUvarint(nil, 64<<20)))
	f.Add(groupHead(1, 2, 3, 0))
	f.Fuzz(func(t *testing.T, answer []byte) {
		groups, err := readConsumed(answer)
		if err != nil {
			return
		}
		held, records := 0, 0
		for _, g := range groups {
			held += ConsumeGroupHeadSize
			for _, r := range g.records {
				held += 16 + len(r.Key) + len(r.Value)
			}
			records += len(g.records)
			if len(g.records) != g.head.Records || g.head.Records == 0 {
				t.Fatalf("a group of %d records read %d", g.head.Records, len(g.records))
			}
		}
		if held > len(answer) || records > MaxConsumeRecords {
			t.Fatalf("%d bytes of %d records out of a %d-byte answer", held, records, len(answer))
		}
		again, err := readConsumed(appendConsumed(nil, groups))
		if err != nil || !sameGroups(groups, again) {
			t.Fatalf("%d groups encoded again decoded as %d: %v", len(groups), len(again), err)
		}
		packed, err := readConsumedFrom(bytes.NewReader(answer), true)
		if err != nil || !sameGroups(groups, packed) {
			t.Fatalf("%d groups read packed as %d: %v", len(groups), len(packed), err)
		}
	})
}
