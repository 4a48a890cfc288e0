package wire

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
)

func payloadOf(t testing.TB, records ...[]byte) []byte {
	t.Helper()
	var payload []byte
	for _, r := range records {
		var err error
		if payload, err = AppendRecordFrame(payload, r); err != nil {
			t.Fatal(err)
		}
	}
	return payload
}

func TestRecordFraming_Sizes(t *testing.T) {
	records := [][]byte{nil, []byte("a"), bytes.Repeat([]byte("x"), 300)}
	payload := payloadOf(t, records...)
	if len(payload) != EncodedPayloadSize(records) {
		t.Fatalf("payload %d bytes, EncodedPayloadSize %d", len(payload), EncodedPayloadSize(records))
	}
	if RecordFramingSize(300) != 304 {
		t.Fatalf("RecordFramingSize(300) = %d", RecordFramingSize(300))
	}
	// [len:4BE][record bytes]
	if !bytes.Equal(payload[:9], []byte{0, 0, 0, 0, 0, 0, 0, 1, 'a'}) || binary.BigEndian.Uint32(payload[9:]) != 300 {
		t.Fatalf("payload starts %x", payload[:13])
	}
}

func TestAppendRecordFrame_RecordOverBoundIsTooLarge(t *testing.T) {
	// A fresh large allocation the encoder refuses on its length alone.
	huge := make([]byte, MaxRecordBytes+1)
	got, err := AppendRecordFrame([]byte("keep"), huge)
	wantErr(t, err, ErrTooLarge)
	if string(got) != "keep" {
		t.Fatalf("dst changed on error: %q", got)
	}
}

func TestRecordReader_ReturnsRecordsInOrder(t *testing.T) {
	records := [][]byte{[]byte("first"), nil, []byte("third record")}
	payload := payloadOf(t, records...)
	var r RecordReader
	if err := r.Reset(payload, len(records)); err != nil {
		t.Fatal(err)
	}
	for i, want := range records {
		if r.Remaining() != len(records)-i {
			t.Fatalf("Remaining = %d before record %d", r.Remaining(), i)
		}
		got, ok := r.Next()
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("record %d = %q, %v; want %q", i, got, ok, want)
		}
	}
	if got, ok := r.Next(); ok || got != nil {
		t.Fatalf("Next after the last record = %q, %v", got, ok)
	}
}

func TestRecordReader_RecordsPointIntoPayloadWithCappedCapacity(t *testing.T) {
	payload := payloadOf(t, []byte("ab"), []byte("cd"))
	var r RecordReader
	if err := r.Reset(payload, 2); err != nil {
		t.Fatal(err)
	}
	first, _ := r.Next()
	if &first[0] != &payload[4] {
		t.Fatal("record was copied")
	}
	if cap(first) != len(first) {
		t.Fatalf("cap %d, len %d: appending would overwrite the next length prefix", cap(first), len(first))
	}
	_ = append(first, 'X')
	if second, _ := r.Next(); string(second) != "cd" {
		t.Fatalf("second record %q after appending to the first", second)
	}
}

func TestRecordReader_Rejects(t *testing.T) {
	twoRecords := payloadOf(t, []byte("abc"), []byte("de"))
	hugeLen := binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF)
	hugeLen = append(hugeLen, "some bytes"...)
	cases := []struct {
		name    string
		payload []byte
		count   int
		want    error
	}{
		{"negative count", twoRecords, -1, ErrCorrupt},
		{"count over payload/4 (R6)", twoRecords, len(twoRecords)/4 + 1, ErrCorrupt},
		{"count 0x7FFFFFFF over a short payload (row 11)", twoRecords, 0x7FFFFFFF, ErrCorrupt},
		{"fewer records than count", twoRecords, 3, ErrCorrupt},
		{"more records than count: trailing bytes", twoRecords, 1, ErrCorrupt},
		{"count zero with bytes present", twoRecords, 0, ErrCorrupt},
		{"one trailing byte", append(bytes.Clone(twoRecords), 0), 2, ErrCorrupt},
		{"length prefix cut short", twoRecords[:len(twoRecords)-4], 2, ErrCorrupt},
		{"record runs past the payload", twoRecords[:len(twoRecords)-1], 2, ErrCorrupt},
		{"length 0xFFFFFFFF (row 11)", hugeLen, 1, ErrCorrupt},
		{"length one past the end", append(binary.BigEndian.AppendUint32(nil, 5), "abcd"...), 1, ErrCorrupt},
		{"empty payload with one record", nil, 1, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r RecordReader
			if err := r.Reset(twoRecords, 2); err != nil {
				t.Fatal(err)
			}
			err := r.Reset(c.payload, c.count)
			wantErr(t, err, c.want)
			if got, ok := r.Next(); ok || r.Remaining() != 0 {
				t.Fatalf("failed Reset still yields %q", got)
			}
			dst := make([][]byte, 1, 4)
			got, err := SplitRecords(dst, c.payload, c.count)
			wantErr(t, err, c.want)
			if len(got) != 1 || cap(got) != 4 {
				t.Fatalf("SplitRecords changed dst on error: len %d cap %d", len(got), cap(got))
			}
		})
	}
}

func TestRecordReader_AcceptsEmptyPayloadOfZeroRecords(t *testing.T) {
	var r RecordReader
	if err := r.Reset(nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Next(); ok {
		t.Fatal("a record from an empty payload")
	}
	var zero RecordReader
	if _, ok := zero.Next(); ok {
		t.Fatal("the zero RecordReader yields a record")
	}
}

func TestSplitRecords_AppendsToDst(t *testing.T) {
	payload := payloadOf(t, []byte("x"), []byte("yz"))
	got, err := SplitRecords([][]byte{[]byte("existing")}, payload, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0]) != "existing" || string(got[1]) != "x" || string(got[2]) != "yz" {
		t.Fatalf("got %q", got)
	}
}

func TestSplitRecords_CorruptCountDoesNotAllocate(t *testing.T) {
	// R6 / row 11: a count of 2^31-1 over an 8-byte payload must not make
	// room for 2^31-1 slices before the check.
	payload := payloadOf(t, []byte("abcd"))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := SplitRecords(nil, payload, 0x7FFFFFFF)
	runtime.ReadMemStats(&after)
	wantErr(t, err, ErrCorrupt)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Fatalf("SplitRecords allocated %d bytes for a corrupt count", grew)
	}
}

func TestRecordReader_DoesNotAllocate(t *testing.T) {
	payload := payloadOf(t, []byte("one"), []byte("two"), []byte("three"))
	var r RecordReader
	allocs := testing.AllocsPerRun(100, func() {
		if err := r.Reset(payload, 3); err != nil {
			panic(err)
		}
		for {
			if _, ok := r.Next(); !ok {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("Reset+Next allocate %v times", allocs)
	}
}

func FuzzRecordReader(f *testing.F) {
	f.Add(payloadOf(f, []byte("a"), []byte("bc")), 2)
	f.Add(payloadOf(f, nil), 1)
	f.Add([]byte{}, 0)
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 1}, 1)
	f.Fuzz(func(t *testing.T, payload []byte, count int) {
		var r RecordReader
		err := r.Reset(payload, count)
		split, splitErr := SplitRecords(nil, payload, count)
		if (err == nil) != (splitErr == nil) {
			t.Fatalf("Reset: %v, SplitRecords: %v", err, splitErr)
		}
		if count == 1 {
			only, onlyErr := OnlyRecord(payload)
			if (onlyErr == nil) != (err == nil) || (err == nil && !bytes.Equal(only, split[0])) {
				t.Fatalf("OnlyRecord: %x, %v; Reset: %v", only, onlyErr, err)
			}
			if onlyErr != nil {
				wantErr(t, onlyErr, ErrCorrupt)
			}
		}
		// A walk by CutRecord, in one pass, takes count records and leaves
		// nothing exactly when Reset accepts the payload, and cuts the
		// same records.
		rest, cut := payload, 0
		for ; cut < count; cut++ {
			record, tail, ok := CutRecord(rest)
			if !ok {
				break
			}
			if err == nil && !bytes.Equal(record, split[cut]) {
				t.Fatalf("record %d differs between CutRecord and SplitRecords", cut)
			}
			rest = tail
		}
		if walked := count >= 0 && cut == count && len(rest) == 0; walked != (err == nil) {
			t.Fatalf("CutRecord walked %d of %d records, %d bytes left; Reset: %v", cut, count, len(rest), err)
		}
		if err != nil {
			wantErr(t, err, ErrCorrupt)
			return
		}
		// Round trip: framing the records again gives the payload back.
		var again []byte
		n := 0
		for {
			record, ok := r.Next()
			if !ok {
				break
			}
			if !bytes.Equal(record, split[n]) {
				t.Fatalf("record %d differs between RecordReader and SplitRecords", n)
			}
			if again, err = AppendRecordFrame(again, record); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != count || !bytes.Equal(again, payload) {
			t.Fatalf("%d records re-framed to %x, payload %x", n, again, payload)
		}
	})
}
