package codec

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

// trainingSamples are one-record payloads of the order events the tests
// use everywhere: what a trickle-fed topic trains on.
func trainingSamples(seed uint64, n int) [][]byte {
	generator := newEventGenerator(seed)
	samples := make([][]byte, n)
	for i := range samples {
		samples[i] = generator.framePayload(1)
	}
	return samples
}

// testDictionary is one dictionary trained once for the package's tests.
var testDictionary = sync.OnceValues(func() (*Dictionary, error) {
	return TrainDictionary(trainingSamples(7, 2000), 0)
})

func dictionaryOrFatal(t testing.TB) *Dictionary {
	t.Helper()
	d, err := testDictionary()
	if err != nil {
		t.Fatalf("TrainDictionary: %v", err)
	}
	return d
}

func TestDictionaryFramesNameTheirDictionary(t *testing.T) {
	d := dictionaryOrFatal(t)
	if d.ID() < MinDictionaryID || d.ID() > MaxDictionaryID {
		t.Fatalf("trained id %d outside the private range", d.ID())
	}
	payload := newEventGenerator(99).framePayload(1)
	encoded := encodeOrFatal(t, WithDictionary(d, nil), payload)
	var header zstd.Header
	if err := header.Decode(encoded); err != nil {
		t.Fatal(err)
	}
	if header.DictionaryID != d.ID() {
		t.Fatalf("frame header names dictionary %d, want %d", header.DictionaryID, d.ID())
	}
	if id, err := FrameDictionary(encoded, len(payload)); err != nil || id != d.ID() {
		t.Fatalf("FrameDictionary = %d, %v; want %d", id, err, d.ID())
	}
}

func TestDictionaryDecodeFindsItsDictionaryByID(t *testing.T) {
	d := dictionaryOrFatal(t)
	other, err := TrainDictionary(trainingSamples(8, 500), 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	if other.ID() == d.ID() {
		t.Fatalf("different samples gave the same id %d", d.ID())
	}
	payload := newEventGenerator(100).framePayload(1)
	encoded := encodeOrFatal(t, WithDictionary(d, nil), payload)

	var both DictionarySet
	for _, add := range []*Dictionary{other, d} {
		if err := both.Add(add); err != nil {
			t.Fatal(err)
		}
	}
	decoder, err := ForFrame(ZstdDict, &both)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := decoder.Decode(nil, encoded, len(payload))
	if err != nil || !bytes.Equal(decoded, payload) {
		t.Fatalf("decode through the set: %v", err)
	}

	// The set without it, no set, and ByID's codec: the frame is intact but
	// its dictionary is missing, which is not corruption.
	var onlyOther DictionarySet
	if err := onlyOther.Add(other); err != nil {
		t.Fatal(err)
	}
	byID, _ := ByID(ZstdDict)
	forNil, _ := ForFrame(ZstdDict, nil)
	forOther, _ := ForFrame(ZstdDict, &onlyOther)
	for name, c := range map[string]Codec{"ByID": byID, "ForFrame(nil)": forNil, "ForFrame(other)": forOther} {
		decoded, err := c.Decode(nil, encoded, len(payload))
		if !errors.Is(err, ErrDictionaryMissing) || errors.Is(err, ErrCorrupt) || decoded != nil {
			t.Errorf("%s: Decode = %d bytes, %v; want ErrDictionaryMissing only", name, len(decoded), err)
		}
	}

	// The plain zstd codec refuses a frame that names a dictionary.
	if _, err := (zstdCodec{}).Decode(nil, encoded, len(payload)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("zstd Decode of a dictionary frame: %v, want ErrCorrupt", err)
	}
	// ByID's codec has nothing to encode with.
	if _, err := byID.Encode(nil, payload); !errors.Is(err, ErrNoDictionary) {
		t.Errorf("ByID(ZstdDict).Encode: %v, want ErrNoDictionary", err)
	}
}

// TestDictionaryShrinksSmallRecords is why dictionaries exist: one small
// record a frame compresses far better with one than without.
func TestDictionaryShrinksSmallRecords(t *testing.T) {
	d := dictionaryOrFatal(t)
	generator := newEventGenerator(4242)
	var plain, withDict, raw int
	for range 200 {
		payload := generator.framePayload(1)
		raw += len(payload)
		plain += len(encodeOrFatal(t, zstdCodec{}, payload))
		withDict += len(encodeOrFatal(t, WithDictionary(d, nil), payload))
	}
	t.Logf("200 one-record payloads: %d bytes, zstd %d (%.0f%% saved), zstd-dict %d (%.0f%% saved)",
		raw, plain, 100-100*float64(plain)/float64(raw), withDict, 100-100*float64(withDict)/float64(raw))
	if withDict*4 > plain*3 {
		t.Fatalf("zstd-dict %d bytes is not a quarter below zstd's %d", withDict, plain)
	}
}

// TestTrainDictionary_OneIDOneDictionary: trainings on the same samples
// (a retry) give the same dictionary or different ids, never different
// bytes under one id, which DictionarySet.Add and the dictionary file
// refuse as a conflict.
func TestTrainDictionary_OneIDOneDictionary(t *testing.T) {
	samples := trainingSamples(9, 300)
	a, err := TrainDictionary(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		b, err := TrainDictionary(samples, 4<<10)
		if err != nil {
			t.Fatal(err)
		}
		if a.ID() == b.ID() && !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("training %d: id %d names two different dictionaries", i+2, a.ID())
		}
	}
}

func TestTrainDictionaryRefusesWhatItCannotLearnFrom(t *testing.T) {
	for name, tc := range map[string]struct {
		samples  [][]byte
		maxBytes int
	}{
		"too few samples": {trainingSamples(1, MinTrainingSamples-1), 0},
		"tiny samples":    {bytes.Fields(bytes.Repeat([]byte("a "), 100)), 0},
		"size too small":  {trainingSamples(1, 100), 100},
		"size too large":  {trainingSamples(1, 100), MaxDictionaryBytes + 1},
		"too many bytes":  {[][]byte{make([]byte, MaxTrainingBytes), {1}, {2}, {3}, {4}, {5}, {6}, {7}}, 0},
	} {
		if d, err := TrainDictionary(tc.samples, tc.maxBytes); !errors.Is(err, ErrBadDictionary) || d != nil {
			t.Errorf("%s: TrainDictionary = %v, %v; want ErrBadDictionary", name, d, err)
		}
	}
}

func TestParseDictionaryChecksWhatItIsGiven(t *testing.T) {
	d := dictionaryOrFatal(t)
	again, err := ParseDictionary(d.Bytes())
	if err != nil || !again.Equal(d) {
		t.Fatalf("ParseDictionary(Bytes()) = %v, %v", again, err)
	}
	reserved, err := dict.BuildZstdDict(trainingSamples(3, 200), dict.Options{MaxDictSize: 4 << 10, HashBytes: 6, ZstdDictID: 5})
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(d.Bytes())
	flipped[0] ^= 1
	for name, raw := range map[string][]byte{
		"empty":       {},
		"garbage":     randomBytes(5, 4096),
		"bad magic":   flipped,
		"truncated":   d.Bytes()[:20],
		"reserved id": reserved,
		"too large":   make([]byte, MaxDictionaryBytes+1),
	} {
		if got, err := ParseDictionary(raw); !errors.Is(err, ErrBadDictionary) || got != nil {
			t.Errorf("%s: ParseDictionary = %v, %v; want ErrBadDictionary", name, got, err)
		}
	}
}

func TestDictionarySetRefusesADifferentDictionaryUnderATakenID(t *testing.T) {
	d := dictionaryOrFatal(t)
	var set DictionarySet
	if err := set.Add(d); err != nil {
		t.Fatal(err)
	}
	if err := set.Add(d); err != nil {
		t.Fatalf("adding the same dictionary again: %v", err)
	}
	impostorRaw, err := dict.BuildZstdDict(trainingSamples(11, 300), dict.Options{MaxDictSize: 4 << 10, HashBytes: 6, ZstdDictID: d.ID()})
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := ParseDictionary(impostorRaw)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Add(impostor); !errors.Is(err, ErrDictionaryConflict) {
		t.Fatalf("Add of another dictionary with id %d: %v, want ErrDictionaryConflict", d.ID(), err)
	}
	if set.Lookup(d.ID()) != d || len(set.IDs()) != 1 {
		t.Fatalf("the set changed: %v", set.IDs())
	}
}

// TestDictionaryFrameVector decodes a frame stored by an earlier build with
// a dictionary stored with it (testdata): frames on disk stay readable
// whatever the library or the trainer become.
func TestDictionaryFrameVector(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	d, err := ParseDictionary(read("dictionary.zdict"))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID() != 765402008 {
		t.Fatalf("vector dictionary id %d, want 765402008", d.ID())
	}
	var set DictionarySet
	if err := set.Add(d); err != nil {
		t.Fatal(err)
	}
	c, err := ForFrame(ZstdDict, &set)
	if err != nil {
		t.Fatal(err)
	}
	want := read("zstd-dict-frame.payload")
	if !bytes.Equal(want, newEventGenerator(78).framePayload(2)) {
		t.Fatalf("the vector's payload is not the generator's: the test's inputs changed")
	}
	got, err := c.Decode(nil, read("zstd-dict-frame.zst"), len(want))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("vector frame decodes to %d bytes, %v", len(got), err)
	}
}

func TestDictionarySetCurrentEncodesWithIt(t *testing.T) {
	d := dictionaryOrFatal(t)
	var set DictionarySet
	if set.CurrentCodec() != nil || set.Current() != nil {
		t.Fatal("an empty set has a current dictionary")
	}
	if err := set.SetCurrent(d.ID()); !errors.Is(err, ErrDictionaryMissing) {
		t.Fatalf("SetCurrent of an absent id: %v", err)
	}
	if err := set.Add(d); err != nil {
		t.Fatal(err)
	}
	if err := set.SetCurrent(d.ID()); err != nil {
		t.Fatal(err)
	}
	c := set.CurrentCodec()
	if c == nil || c.ID() != ZstdDict || set.Current() != d {
		t.Fatalf("current codec %v, dictionary %v", c, set.Current())
	}
	payload := newEventGenerator(5).framePayload(1)
	encoded := encodeOrFatal(t, c, payload)
	if id, _ := FrameDictionary(encoded, len(payload)); id != d.ID() {
		t.Fatalf("the current codec's frame names %d, want %d", id, d.ID())
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = set.CurrentCodec() }); allocs != 0 {
		t.Fatalf("CurrentCodec allocates %.0f times", allocs)
	}
}

// TestForFrameAllocatesNothing: a read looks a codec up for every frame.
func TestForFrameAllocatesNothing(t *testing.T) {
	set := &DictionarySet{}
	for _, dicts := range []*DictionarySet{nil, set} {
		for _, id := range []ID{None, Zstd, ZstdDict} {
			if allocs := testing.AllocsPerRun(100, func() { _, _ = ForFrame(id, dicts) }); allocs != 0 {
				t.Errorf("ForFrame(%s, %v) allocates %.0f times", id, dicts != nil, allocs)
			}
		}
	}
}

// TestDictionaryEncoderMemoryIsBoundedWhatEverTheCores: a dictionary's
// encoder lives as long as the dictionary (a node may hold 16 per topic),
// so what it allocates must not grow with GOMAXPROCS: at 64 it must stay
// near what it is at 2, not the library's one block encoder per core.
func TestDictionaryEncoderMemoryIsBoundedWhatEverTheCores(t *testing.T) {
	samples := trainingSamples(3, 300)
	allocated := func(procs int) uint64 {
		defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(procs))
		d, err := TrainDictionary(samples, 8<<10)
		if err != nil {
			t.Fatal(err)
		}
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		if _, err := WithDictionary(d, nil).Encode(nil, samples[0]); err != nil {
			t.Fatal(err)
		}
		goruntime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	at2, at64 := allocated(2), allocated(64)
	t.Logf("a dictionary's encoder and first frame: %.1f MiB at GOMAXPROCS 2, %.1f MiB at 64", float64(at2)/(1<<20), float64(at64)/(1<<20))
	if at64 > 2*at2 {
		t.Fatalf("at GOMAXPROCS 64 a dictionary's encoder took %d bytes, more than twice the %d at 2", at64, at2)
	}
}
