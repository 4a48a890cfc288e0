package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

func TestEnvelope_RoundTrip(t *testing.T) {
	cases := []struct {
		name    string
		key     []byte
		time    int64
		payload []byte
	}{
		{"no key, no payload", nil, 0, nil},
		{"key and payload", []byte("user-42"), 1764450000123, []byte("value")},
		{"127-byte key: one-byte uvarint", bytes.Repeat([]byte("k"), 127), 1, []byte("v")},
		{"128-byte key: two-byte uvarint", bytes.Repeat([]byte("k"), 128), 1, []byte("v")},
		{"key at MaxKeyBytes: three-byte uvarint", bytes.Repeat([]byte("k"), MaxKeyBytes), 1, []byte("v")},
		{"negative commit time is carried as is", []byte("k"), -1, nil},
		{"max commit time", nil, math.MaxInt64, []byte("p")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, err := AppendEnvelope([]byte("prefix"), c.key, c.time, c.payload)
			if err != nil {
				t.Fatal(err)
			}
			env = env[len("prefix"):]
			if len(env) != EnvelopeSize(len(c.key), len(c.payload)) {
				t.Fatalf("envelope %d bytes, EnvelopeSize %d", len(env), EnvelopeSize(len(c.key), len(c.payload)))
			}
			got, err := ParseEnvelope(env)
			if err != nil {
				t.Fatal(err)
			}
			assertEnvelope(t, got, Envelope{Key: c.key, CommittedAtUnixMs: c.time, Payload: c.payload})
		})
	}
}

func TestParseEnvelope_SlicesPointIntoBufferWithCappedCapacity(t *testing.T) {
	env, err := AppendEnvelope(nil, []byte("key"), 5, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	if &got.Key[0] != &env[2] || &got.Payload[0] != &env[13] {
		t.Fatal("key or payload was copied")
	}
	if cap(got.Key) != len(got.Key) || cap(got.Payload) != len(got.Payload) {
		t.Fatal("capacity not capped: appending to Key would overwrite the commit time")
	}
}

func TestParseEnvelope_Rejects(t *testing.T) {
	withKeyLen := func(uvarint ...byte) []byte {
		b := append([]byte{EnvelopeVersion}, uvarint...)
		return append(b, make([]byte, 20)...)
	}
	tooLongKey := binary.AppendUvarint([]byte{EnvelopeVersion}, MaxKeyBytes+1)
	tooLongKey = append(tooLongKey, make([]byte, MaxKeyBytes+1+8)...)
	cases := []struct {
		name string
		env  []byte
	}{
		{"empty record", nil},
		{"version 0x01", []byte{0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"version 0x03", []byte{0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"version byte only", []byte{EnvelopeVersion}},
		{"uvarint runs past the end", []byte{EnvelopeVersion, 0x80}},
		{"uvarint longer than 10 bytes", withKeyLen(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01)},
		{"uvarint over 64 bits", withKeyLen(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02)},
		{"non-minimal uvarint for 0", withKeyLen(0x80, 0x00)},
		{"non-minimal uvarint for 1", withKeyLen(0x81, 0x80, 0x00)},
		{"key length over MaxKeyBytes", tooLongKey},
		{"key runs past the end", []byte{EnvelopeVersion, 5, 'a', 'b'}},
		{"no room for the commit time", []byte{EnvelopeVersion, 1, 'k', 0, 0, 0, 0, 0, 0, 0}},
		{"key eats the commit time", []byte{EnvelopeVersion, 8, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"key length 2^63", withKeyLen(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseEnvelope(c.env)
			wantErr(t, err, ErrCorrupt)
			if got.Key != nil || got.Payload != nil || got.CommittedAtUnixMs != 0 {
				t.Fatalf("envelope %+v returned with an error", got)
			}
			wantErr(t, SetEnvelopeCommitTime(bytes.Clone(c.env), 1), ErrCorrupt)
		})
	}
}

func TestParseEnvelope_ShortEnvelopeIsCorruptNotTruncated(t *testing.T) {
	// An envelope lives inside a CRC-checked frame: missing bytes there are
	// corruption, never a torn write to wait for.
	env, _ := AppendEnvelope(nil, []byte("k"), 1, nil)
	_, err := ParseEnvelope(env[:len(env)-1])
	wantErr(t, err, ErrCorrupt)
	if errorIsAny(err, ErrTruncated) {
		t.Fatal("short envelope reported as truncated")
	}
}

func TestAppendEnvelope_Rejects(t *testing.T) {
	cases := []struct {
		name    string
		key     []byte
		payload []byte
	}{
		{"key over MaxKeyBytes", make([]byte, MaxKeyBytes+1), nil},
		{"payload over the record bound", nil, make([]byte, MaxRecordBytes+1)},
		{"envelope over the record bound", nil, make([]byte, MaxRecordBytes-9)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := AppendEnvelope([]byte("keep"), c.key, 1, c.payload)
			wantErr(t, err, ErrTooLarge)
			if string(got) != "keep" {
				t.Fatalf("dst changed on error: %q", got)
			}
		})
	}
}

func TestAppendEnvelopeRecord_IsTheRecordAppendRecordFrameWrites(t *testing.T) {
	var want, got []byte
	for i, c := range []struct{ key, payload string }{{"", ""}, {"user-42", "payload"}, {"k", strings.Repeat("v", 300)}} {
		env, _ := AppendEnvelope(nil, []byte(c.key), int64(i), []byte(c.payload))
		want, _ = AppendRecordFrame(want, env)
		var lent []byte
		var err error
		if got, lent, err = AppendEnvelopeRecord(got, []byte(c.key), int64(i), []byte(c.payload)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(lent, env) || cap(lent) != len(lent) {
			t.Fatalf("record %d: envelope %q (cap %d), want %q with no room past it", i, lent, cap(lent), env)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("payload %x, want %x", got, want)
	}
	if err := CheckPayload(got, 3); err != nil {
		t.Fatal(err)
	}
	kept, env, err := AppendEnvelopeRecord([]byte("keep"), make([]byte, MaxKeyBytes+1), 1, nil)
	wantErr(t, err, ErrTooLarge)
	if string(kept) != "keep" || env != nil {
		t.Fatalf("on error: dst %q, envelope %q", kept, env)
	}
}

func TestSetEnvelopeCommitTime_RaisesInPlace(t *testing.T) {
	// Design: the commit time is raised under the produce lock to the
	// newest one the partition has seen; only those 8 bytes change.
	env, _ := AppendEnvelope(nil, []byte("user-42"), 100, []byte("payload"))
	before := bytes.Clone(env)
	if err := SetEnvelopeCommitTime(env, 250); err != nil {
		t.Fatal(err)
	}
	got, err := ParseEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	assertEnvelope(t, got, Envelope{Key: []byte("user-42"), CommittedAtUnixMs: 250, Payload: []byte("payload")})
	for i := range env {
		if (i < 9 || i >= 17) && env[i] != before[i] {
			t.Fatalf("byte %d outside the commit time changed", i)
		}
	}
}

func TestParseEnvelope_DoesNotAllocate(t *testing.T) {
	env, _ := AppendEnvelope(nil, []byte("user-42"), 100, []byte("payload"))
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseEnvelope(env) }); n != 0 {
		t.Fatalf("ParseEnvelope allocates %v times", n)
	}
}

func FuzzParseEnvelope(f *testing.F) {
	for _, seed := range [][]byte{
		mustEnvelope(f, nil, 0, nil),
		mustEnvelope(f, []byte("user-42"), 1764450000123, []byte(`{"total": 12.5}`)),
		mustEnvelope(f, bytes.Repeat([]byte("k"), 200), -5, []byte("x")),
		mustEnvelope(f, bytes.Repeat([]byte("k"), 127), 7, []byte("x")), // the longest key with a one-byte length
		mustEnvelope(f, bytes.Repeat([]byte("k"), 128), 7, nil),         // the shortest with two
		{EnvelopeVersion, 0x80, 0x00, 0, 0, 0, 0, 0, 0, 0, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := ParseEnvelope(b)
		if err != nil {
			wantErr(t, err, ErrCorrupt)
			return
		}
		again, err := AppendEnvelope(nil, env.Key, env.CommittedAtUnixMs, env.Payload)
		if err != nil {
			t.Fatalf("re-encoding a valid envelope: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, input %x", again, b)
		}
	})
}

func mustEnvelope(t testing.TB, key []byte, ms int64, payload []byte) []byte {
	t.Helper()
	env, err := AppendEnvelope(nil, key, ms, payload)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
