package codec

import (
	"fmt"
	"testing"
)

// benchmarkRecordCounts are the two ends of the design's claim: trickle
// traffic gives one record per frame, busy traffic hundreds.
var benchmarkRecordCounts = []int{1, 500}

// benchmarkFrames returns frame payloads of recordCount records each, 4000
// records (about 1.3 MB) in all, the same bytes on every run.
func benchmarkFrames(recordCount int) [][]byte {
	generator := newEventGenerator(uint64(recordCount))
	frames := make([][]byte, max(1, 4000/recordCount))
	for i := range frames {
		frames[i] = generator.framePayload(recordCount)
	}
	return frames
}

// benchmarkCodec is the codec a benchmark names: none, zstd, or zstd-dict
// (the package's test dictionary, trained on 2,000 one-record payloads of
// other events).
func benchmarkCodec(b *testing.B, name string) Codec {
	b.Helper()
	if name == zstdDictName {
		return WithDictionary(dictionaryOrFatal(b), nil)
	}
	codec, err := ByName(name)
	if err != nil {
		b.Fatal(err)
	}
	return codec
}

var benchmarkCodecNames = []string{noneName, zstdName, zstdDictName}

// compressionOf encodes every frame once and returns the raw and stored
// byte totals.
func compressionOf(b *testing.B, codec Codec, frames [][]byte) (rawBytes, storedBytes int) {
	for _, frame := range frames {
		encoded, err := codec.Encode(nil, frame)
		if err != nil {
			b.Fatalf("Encode: %v", err)
		}
		rawBytes += len(frame)
		storedBytes += len(encoded)
	}
	return rawBytes, storedBytes
}

// BenchmarkCompression measures encoding a frame payload, and reports what
// the codec saves over the whole set of frames: saved_% = 100*(1-stored/raw),
// ratio = raw/stored. MB/s counts raw bytes. codec=none is the baseline.
func BenchmarkCompression(b *testing.B) {
	for _, codecName := range benchmarkCodecNames {
		for _, recordCount := range benchmarkRecordCounts {
			b.Run(fmt.Sprintf("codec=%s/records=%d", codecName, recordCount), func(b *testing.B) {
				codec := benchmarkCodec(b, codecName)
				frames := benchmarkFrames(recordCount)
				rawBytes, storedBytes := compressionOf(b, codec, frames)
				b.SetBytes(int64(rawBytes / len(frames)))
				b.ReportAllocs()
				var encoded []byte
				var err error
				frame := 0
				for b.Loop() {
					encoded, err = codec.Encode(encoded[:0], frames[frame])
					if err != nil {
						b.Fatalf("Encode: %v", err)
					}
					frame = (frame + 1) % len(frames)
				}
				b.ReportMetric(100*(1-float64(storedBytes)/float64(rawBytes)), "saved_%")
				b.ReportMetric(float64(rawBytes)/float64(storedBytes), "ratio")
				b.ReportMetric(float64(rawBytes)/float64(len(frames)), "raw_bytes/frame")
			})
		}
	}
}

// BenchmarkDecompression measures decoding a stored frame payload into a
// reused buffer, as a read through a free list does. MB/s counts decoded
// bytes.
func BenchmarkDecompression(b *testing.B) {
	for _, codecName := range benchmarkCodecNames {
		for _, recordCount := range benchmarkRecordCounts {
			b.Run(fmt.Sprintf("codec=%s/records=%d", codecName, recordCount), func(b *testing.B) {
				codec := benchmarkCodec(b, codecName)
				frames := benchmarkFrames(recordCount)
				var err error
				stored := make([][]byte, len(frames))
				rawBytes, largestFrame := 0, 0
				for i, frame := range frames {
					if stored[i], err = codec.Encode(nil, frame); err != nil {
						b.Fatalf("Encode: %v", err)
					}
					rawBytes += len(frame)
					largestFrame = max(largestFrame, len(frame))
				}
				b.SetBytes(int64(rawBytes / len(frames)))
				b.ReportAllocs()
				decoded := make([]byte, 0, largestFrame+zstdMaxBlockBytes)
				frame := 0
				for b.Loop() {
					if _, err := codec.Decode(decoded, stored[frame], len(frames[frame])); err != nil {
						b.Fatalf("Decode: %v", err)
					}
					frame = (frame + 1) % len(frames)
				}
			})
		}
	}
}
