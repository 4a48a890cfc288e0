package partition

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// The dictionary benchmarks (docs/performance.md, "Dictionaries"): small
// JSON records, one a frame (trickle traffic) and 500 a frame (busy), with
// codec none, zstd and zstd with a dictionary trained on other records of
// the same kind. Quote them as ratios to codec=none in the same run.

var (
	benchProducts  = []string{"espresso beans 1kg", "oat milk 1l", "ceramic mug", "pour-over kettle", "paper filters x100", "burr grinder", "cold brew bottle", "tea sampler"}
	benchStatuses  = []string{"created", "paid", "packed", "shipped", "delivered", "cancelled"}
	benchCountries = []string{"DE", "FR", "NL", "IT", "ES", "AT", "BE", "PL", "SE", "GB"}
	benchPayments  = []string{"card", "paypal", "sepa", "invoice", "apple_pay"}
)

// benchJSONRecords are n order events of about 250 bytes, keyed by order,
// the same for a seed on every run.
func benchJSONRecords(seed uint64, n int) []Record {
	random := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(from []string) string { return from[random.IntN(len(from))] }
	out := make([]Record, n)
	for i := range out {
		order := 1_000_000 + int(seed%1000)*1000 + i
		items := ""
		for j := range 1 + random.IntN(3) {
			if j > 0 {
				items += ","
			}
			items += fmt.Sprintf(`{"sku":"SKU-%05d","name":%q,"qty":%d,"price_cents":%d}`, random.IntN(20000), pick(benchProducts), 1+random.IntN(4), 199+random.IntN(9000))
		}
		out[i] = Record{Key: fmt.Appendf(nil, "ord-%d", order), Value: fmt.Appendf(nil,
			`{"event":"order_%s","order_id":%d,"customer_id":"cus_%08x","ts":"2026-03-14T09:%02d:%02d.%03dZ","country":%q,"payment":%q,"currency":"EUR","items":[%s]}`,
			pick(benchStatuses), order, random.Uint32(), random.IntN(60), random.IntN(60), random.IntN(1000), pick(benchCountries), pick(benchPayments), items)}
	}
	return out
}

// benchDictionaries is a set whose current dictionary was trained on 2,000
// other records' one-record payloads, as a node trains one.
func benchDictionaries(b *testing.B) *codec.DictionarySet {
	b.Helper()
	var samples [][]byte
	for _, r := range benchJSONRecords(999, 2000) {
		env, _ := wire.AppendEnvelope(nil, r.Key, 1773480413000, r.Value)
		sample, _ := wire.AppendRecordFrame(nil, env)
		samples = append(samples, sample)
	}
	d, err := codec.TrainDictionary(samples, 0)
	if err != nil {
		b.Fatal(err)
	}
	set := &codec.DictionarySet{}
	if err := set.Add(d); err != nil {
		b.Fatal(err)
	}
	if err := set.SetCurrent(d.ID()); err != nil {
		b.Fatal(err)
	}
	return set
}

// benchCodecOptions are the options of each codec under test.
func benchCodecOptions(b *testing.B, codecName string) Options {
	b.Helper()
	opts := Options{FS: vfs.OS{}}
	switch codecName {
	case "none":
	case "zstd":
		opts.Codec, _ = codec.ByName("zstd")
	case "zstd-dict":
		opts.Codec, _ = codec.ByName("zstd")
		opts.Dictionaries = benchDictionaries(b)
	}
	return opts
}

// frameBytesIn sums the bytes of the frames in the log's segment files:
// what the records take on disk, the zeros written ahead left out.
func frameBytesIn(b *testing.B, dir string) int64 {
	b.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		base, err := wire.ParseSegmentFileName(e.Name())
		if err != nil {
			continue
		}
		f, err := vfs.OS{}.OpenFile(filepath.Join(dir, e.Name()), os.O_RDONLY)
		if err != nil {
			b.Fatal(err)
		}
		fi, err := f.Stat()
		if err == nil {
			_, err = WalkSegment(f, fi.Size, base, func(_ int64, h wire.FrameHeader, _ []byte) { total += h.FrameLen() }, func(SegmentDamage) {})
		}
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	return total
}

var benchDictionaryCodecs = []string{"none", "zstd", "zstd-dict"}

// BenchmarkDictionaryCommit: one commit (a frame, an fdatasync) a loop of
// records JSON records. Reports records/s and the bytes each record takes
// on disk, frame header included (disk_B/record), and saved_% against the
// frames' uncompressed size.
func BenchmarkDictionaryCommit(b *testing.B) {
	for _, codecName := range benchDictionaryCodecs {
		for _, records := range []int{1, 500} {
			b.Run(fmt.Sprintf("codec=%s/records=%d", codecName, records), func(b *testing.B) {
				dir := b.TempDir()
				l, err := Open(dir, benchCodecOptions(b, codecName))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				batches := make([][]Record, 64)
				raw := int64(0)
				for i := range batches {
					batches[i] = benchJSONRecords(uint64(i), records)
					raw += int64(frameBytesOf(batches[i]))
				}
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					if _, err := l.Produce(bg, batches[n%len(batches)]); err != nil {
						b.Fatal(err)
					}
					n++
				}
				written := n * records
				b.ReportMetric(float64(written)/b.Elapsed().Seconds(), "records/s")
				onDisk := frameBytesIn(b, dir)
				rawWritten := float64(raw) / float64(len(batches)) * float64(n)
				b.ReportMetric(float64(onDisk)/float64(written), "disk_B/record")
				b.ReportMetric(100*(1-float64(onDisk)/rawWritten), "saved_%")
			})
		}
	}
}

// BenchmarkDictionaryRead: a catch-up read (ReadFunc, lending each record)
// of 4,000 records in frames of records each, from a reopened log (page
// cache warm, frame cache cold). MB/s counts the records' values.
func BenchmarkDictionaryRead(b *testing.B) {
	for _, codecName := range benchDictionaryCodecs {
		for _, records := range []int{1, 500} {
			b.Run(fmt.Sprintf("codec=%s/records=%d", codecName, records), func(b *testing.B) {
				dir := b.TempDir()
				opts := benchCodecOptions(b, codecName)
				opts.flush = defaultFlushPolicy
				opts.flush.drainRecords = records // a frame of records records, synced in the background
				l, err := Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				all := benchJSONRecords(7, 4000)
				valueBytes := 0
				for i := 0; i < len(all); i += records {
					if _, err := l.Append(bg, all[i:i+records]); err != nil {
						b.Fatal(err)
					}
					for _, r := range all[i : i+records] {
						valueBytes += len(r.Value)
					}
				}
				if err := l.CommitDurable(bg); err != nil {
					b.Fatal(err)
				}
				l.Close()
				opts.flush = flushPolicy{}
				if l, err = Open(dir, opts); err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				b.SetBytes(int64(valueBytes))
				b.ReportAllocs()
				for b.Loop() {
					l.cache.forgetFrom(0)
					read := 0
					for next := int64(0); next < l.HighWatermark(); {
						sum, err := l.ReadFunc(next, 1000, 1<<20, func(ReadRecord) error { read++; return nil })
						if err != nil {
							b.Fatal(err)
						}
						next = sum.Next
					}
					if read != len(all) {
						b.Fatalf("read %d records, want %d", read, len(all))
					}
				}
				b.ReportMetric(float64(len(all)*b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
