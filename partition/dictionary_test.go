package partition

import (
	"errors"
	"fmt"
	"testing"

	"github.com/narad-io/storage/codec"
)

// trainTestDictionary trains a dictionary on JSON-like records.
func trainTestDictionary(t testing.TB, seed int) *codec.Dictionary {
	t.Helper()
	var samples [][]byte
	for i := range 400 {
		samples = append(samples, fmt.Appendf(nil, `{"order_id":%d,"status":"paid","currency":"EUR","seed":%d,"items":[{"sku":"A-%d","qty":%d}]}`, 1000+i, seed, i%17, i%5))
	}
	d, err := codec.TrainDictionary(samples, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func jsonRecords(from, n int) []Record {
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{Key: fmt.Appendf(nil, "k%d", from+i), Value: fmt.Appendf(nil, `{"order_id":%d,"status":"shipped","currency":"EUR","items":[{"sku":"A-%d","qty":1}]}`, from+i, i%17)}
	}
	return out
}

// TestDictionaryFramesReadByIDAndMissingOnesAreDamage: frames written with
// a topic's dictionary name it; a log reopened with it reads them, one
// reopened without it answers an UnreadableError whose cause is
// codec.ErrDictionaryMissing and never serves them, and frames written
// before and after stay readable.
func TestDictionaryFramesReadByIDAndMissingOnesAreDamage(t *testing.T) {
	d := newDisk(t, 1)
	dict := trainTestDictionary(t, 1)
	withDict := &codec.DictionarySet{}
	if err := withDict.Add(dict); err != nil {
		t.Fatal(err)
	}

	// Three commits: plain (no current dictionary), with the dictionary,
	// plain again.
	opts := testOptions(d)
	opts.Dictionaries = withDict
	l := openLog(t, opts)
	if _, err := l.Produce(bg, jsonRecords(0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := withDict.SetCurrent(dict.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Produce(bg, jsonRecords(3, 3)); err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)

	// The dictionary's frame names it: read the frame's header and payload
	// back through the walk the tools use.
	l = openLog(t, opts)
	res, err := l.Read(3, 10, 1<<20)
	if err != nil || len(res.Records) != 3 || string(res.Records[0].Value) != string(jsonRecords(3, 1)[0].Value) {
		t.Fatalf("read with the dictionary: %d records, %v", len(res.Records), err)
	}
	closeLog(t, l)

	// Without it: the plain frames read, the dictionary's are damage.
	opts.Dictionaries = &codec.DictionarySet{}
	l = openLog(t, opts)
	defer closeLog(t, l)
	if res, err := l.Read(0, 10, 1<<20); err != nil || len(res.Records) != 3 {
		t.Fatalf("plain frame without the dictionary: %d records, %v", len(res.Records), err)
	}
	_, err = l.Read(3, 10, 1<<20)
	var unreadable *UnreadableError
	if !errors.As(err, &unreadable) || !errors.Is(err, codec.ErrDictionaryMissing) || unreadable.Next != 6 {
		t.Fatalf("read of a frame whose dictionary is missing: %v; want an UnreadableError for 3-5 caused by ErrDictionaryMissing", err)
	}
	var lent int
	_, err = l.ReadFunc(3, 10, 1<<20, func(ReadRecord) error { lent++; return nil })
	if !errors.Is(err, ErrUnreadable) || lent != 0 {
		t.Fatalf("ReadFunc of a frame whose dictionary is missing lent %d records: %v", lent, err)
	}
	// The log still takes appends (plain now: the set has no current one)
	// and serves them.
	if _, err := l.Produce(bg, jsonRecords(6, 2)); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Read(6, 10, 1<<20); err != nil || len(res.Records) != 2 {
		t.Fatalf("a frame after the damage: %d records, %v", len(res.Records), err)
	}
}

// TestDictionaryShrinksTheLog: one record a frame, a dictionary's frames
// take fewer bytes than plain zstd's.
func TestDictionaryShrinksTheLog(t *testing.T) {
	sizes := map[string]int64{}
	for _, mode := range []string{"zstd", "zstd-dict"} {
		d := newDisk(t, 2)
		opts := testOptions(d)
		opts.SegmentMaxBytes = 1 << 20
		opts.Codec, _ = codec.ByID(codec.Zstd)
		if mode == "zstd-dict" {
			set := &codec.DictionarySet{}
			dict := trainTestDictionary(t, 2)
			if err := set.Add(dict); err != nil {
				t.Fatal(err)
			}
			if err := set.SetCurrent(dict.ID()); err != nil {
				t.Fatal(err)
			}
			opts.Dictionaries = set
		}
		l := openLog(t, opts)
		for i := range 50 {
			if _, err := l.Produce(bg, jsonRecords(i, 1)); err != nil {
				t.Fatal(err)
			}
		}
		closeLog(t, l)
		b, err := d.Contents(testDir + "/00000000000000000000.log")
		if err != nil {
			t.Fatal(err)
		}
		sizes[mode] = int64(len(b))
	}
	if sizes["zstd-dict"] >= sizes["zstd"] {
		t.Fatalf("50 one-record frames: zstd-dict %d bytes, zstd %d", sizes["zstd-dict"], sizes["zstd"])
	}
}
