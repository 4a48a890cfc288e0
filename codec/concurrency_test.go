package codec

import (
	"bytes"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is left once they end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// exerciseConcurrently has workers encode and decode payloads of assorted
// sizes (through the scratch path, the direct path and into reused dsts) with
// every codec at once, keeps every result and checks them all at the end.
func exerciseConcurrently(t *testing.T, workers, framesPerWorker int) {
	t.Helper()
	codecs := codecsUnderTest(t)
	type outcome struct {
		payload, decoded []byte
	}
	outcomes := make([][]outcome, workers)
	var wait sync.WaitGroup
	for worker := range workers {
		wait.Go(func() {
			generator := newEventGenerator(uint64(1000 + worker))
			var reused []byte
			for frame := range framesPerWorker {
				codec := codecs[(worker+frame)%len(codecs)]
				var payload []byte
				switch frame % 4 {
				case 0:
					payload = generator.framePayload(1)
				case 1:
					payload = generator.framePayload(1 + frame%600)
				case 2:
					payload = randomBytes(uint64(worker*framesPerWorker+frame), frame*97%5000)
				default:
					payload = repetitiveBytes(frame * 4099 % (1536 << 10))
				}
				encoded, err := codec.Encode(nil, payload)
				if err != nil {
					t.Errorf("worker %d frame %d: %s: Encode: %v", worker, frame, codec.Name(), err)
					return
				}
				decoded, err := codec.Decode(nil, encoded, len(payload))
				if err != nil {
					t.Errorf("worker %d frame %d: %s: Decode: %v", worker, frame, codec.Name(), err)
					return
				}
				outcomes[worker] = append(outcomes[worker], outcome{payload, decoded})
				// A reused dst, as a read-back free list would hand out.
				reused, err = codec.Decode(reused, encoded, len(payload))
				if err != nil || !bytes.Equal(reused, payload) {
					t.Errorf("worker %d frame %d: %s: Decode into a reused dst: %v", worker, frame, codec.Name(), err)
					return
				}
			}
		})
	}
	wait.Wait()
	for worker := range outcomes {
		for frame, outcome := range outcomes[worker] {
			if !bytes.Equal(outcome.payload, outcome.decoded) {
				t.Fatalf("worker %d frame %d: decoded bytes differ (or changed after the fact)", worker, frame)
			}
		}
	}
}

// TestConcurrentEncodeDecode is meant for -race: the shared encoder, decoder
// and scratch pool used from many goroutines at once.
func TestConcurrentEncodeDecode(t *testing.T) {
	exerciseConcurrently(t, 8, 60)
}

// TestNoGoroutineLeft checks the package doc's promise: creating, encoding
// and decoding concurrently leaves no goroutine behind, neither in the shared
// instances nor in fresh ones built with the same options.
func TestNoGoroutineLeft(t *testing.T) {
	exerciseConcurrently(t, 4, 20)

	encoder, err := newZstdEncoder()
	if err != nil {
		t.Fatalf("newZstdEncoder: %v", err)
	}
	decoder, err := newZstdDecoder()
	if err != nil {
		t.Fatalf("newZstdDecoder: %v", err)
	}
	var wait sync.WaitGroup
	for worker := range 4 {
		wait.Go(func() {
			payload := newEventGenerator(uint64(2000 + worker)).framePayload(300)
			encoded := encoder.EncodeAll(payload, nil)
			decoded, err := decoder.DecodeAll(encoded, make([]byte, 0, len(payload)))
			if err != nil || !bytes.Equal(decoded, payload) {
				t.Errorf("worker %d: fresh decoder: %v", worker, err)
			}
		})
	}
	wait.Wait()
	// Both fresh instances are still alive and unclosed here: no goroutine
	// was stopped by a Close or a finalizer to pass the check.
	goleak.VerifyNone(t)
	runtime.KeepAlive(encoder)
	runtime.KeepAlive(decoder)
}
