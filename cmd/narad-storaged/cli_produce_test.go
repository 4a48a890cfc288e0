package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/narad-io/storage/client"
)

// fakeProduceServer describes a topic of one partition, decodes the
// binary batch of each produce and keeps its values as "committed",
// whatever happens to the client meanwhile (as the daemon does once a
// batch reached the partition's mailbox).
type fakeProduceServer struct {
	mu        sync.Mutex
	values    [][]byte
	bodySizes []int
	// before, if set, runs after the body is read and before the commit.
	before func(r *http.Request)
}

func (f *fakeProduceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		fmt.Fprint(w, `{"name":"t","partitions":[{"partition":0}]}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.bodySizes = append(f.bodySizes, len(body))
	f.mu.Unlock()
	if len(body) > 64<<20 { // the daemon's bound of one request
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprint(w, `{"error":{"code":"batch_too_large","message":"over 64 MiB"}}`)
		return
	}
	br := bufio.NewReader(bytes.NewReader(body))
	var vals [][]byte
	for {
		kl, err := binary.ReadUvarint(br)
		if err == io.EOF {
			break
		}
		io.CopyN(io.Discard, br, int64(kl))
		vl, _ := binary.ReadUvarint(br)
		v := make([]byte, vl)
		io.ReadFull(br, v)
		vals = append(vals, v)
	}
	if f.before != nil {
		f.before(r)
	}
	f.mu.Lock()
	base := len(f.values)
	f.values = append(f.values, vals...)
	f.mu.Unlock()
	fmt.Fprintf(w, `{"base_offset":%d,"count":%d,"high_watermark":%d}`, base, len(vals), base+len(vals))
}

// TestProduce_KeepsExactBytesOfALine: a line's value is every byte before
// its newline, a \r included (found by review: bufio.ScanLines dropped it).
func TestProduce_KeepsExactBytesOfALine(t *testing.T) {
	f := &fakeProduceServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var out, errb bytes.Buffer
	code := runProduce([]string{"--addr", srv.URL, "--topic", "t"}, strings.NewReader("a\r\nb\r"), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := []string{"a\r", "b\r"}
	var got []string
	for _, v := range f.values {
		got = append(got, string(v))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %q, want %q (each line's exact bytes without its \\n)", got, want)
	}
}

// TestProduce_ALargeLineGoesAloneUnderTheBound: a line that would take a
// batch past its bytes goes in the next request, and a line larger than
// a batch goes alone: no request over the daemon's 64 MiB (found by
// review: a batch under 16 MiB plus one large line made a request over
// the daemon's bound).
func TestProduce_ALargeLineGoesAloneUnderTheBound(t *testing.T) {
	f := &fakeProduceServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	in := string(bytes.Repeat([]byte{'a'}, 16<<20-1)) + "\n" + string(bytes.Repeat([]byte{'b'}, 49<<20)) + "\nc\n"
	var out, errb bytes.Buffer
	code := runProduce([]string{"--addr", srv.URL, "--topic", "t", "--batch-bytes", fmt.Sprint(32 << 20)}, strings.NewReader(in), &out, &errb)
	t.Logf("request body sizes: %v", f.bodySizes)
	if code != 0 || len(f.values) != 3 {
		t.Fatalf("exit %d, %d records: %s (each line alone fits in one request)", code, len(f.values), errb.String())
	}
	for _, n := range f.bodySizes {
		if n > 64<<20 {
			t.Errorf("a request of %d bytes, over the daemon's 64 MiB bound", n)
		}
	}
}

// TestProduce_AnInterruptSendsWhatWasRead: an interrupt while a batch
// is sent does not abandon it (the daemon would commit it anyway): the
// command stops reading, sends what it read, and the summary counts what
// was committed (found by review: it said 0 while the server committed 3).
func TestProduce_AnInterruptSendsWhatWasRead(t *testing.T) {
	reading, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	f := &fakeProduceServer{}
	f.before = func(*http.Request) { interrupt() } // the operator's ^C, while the commit is under way
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rep := &produceReport{topic: "t", stderr: &errb}
	stdin, more := io.Pipe() // three lines, then a reader that never ends
	go more.Write([]byte("x\ny\nz\n"))
	code := produceLines(reading, context.Background(), c, "t", produceOptions{batchSize: 3, batchBytes: 1 << 20, linger: 0, inFlight: 4, pinned: -1}, stdin, &out, rep, false)
	more.Close()
	srv.Close() // waits for the handler: the commit is done
	f.mu.Lock()
	committed := len(f.values)
	f.mu.Unlock()
	if code != 1 || committed != 3 || out.String() != "produced 3 records to t/0 in 1 requests, offsets 0..2\n" ||
		!strings.Contains(errb.String(), "interrupted: stopped reading after line 3; every line read was sent") {
		t.Fatalf("exit %d, %q %q; the server committed %d", code, out.String(), errb.String(), committed)
	}
}

// TestReadChunks_LinesWholeWhateverTheReads: chunks end at a newline
// however the input's reads fall (a byte at a time, half reads, a line
// longer than a chunk), the last line comes without one, and a line past
// the bound is an error, not a cut line.
func TestReadChunks_LinesWholeWhateverTheReads(t *testing.T) {
	long := strings.Repeat("L", 3*chunkBytes)
	in := "a\r\nbb\n\nccc\n" + long + "\nlast"
	for name, r := range map[string]func() io.Reader{
		"one byte a read": func() io.Reader { return iotest.OneByteReader(strings.NewReader(in)) },
		"half reads":      func() io.Reader { return iotest.HalfReader(strings.NewReader(in)) },
		"whole":           func() io.Reader { return strings.NewReader(in) },
	} {
		chunks, free := make(chan []byte), make(chan []byte, 4)
		errc := make(chan error, 1)
		go func() { errc <- readChunks(context.Background(), r(), chunks, free) }()
		var got strings.Builder
		for c := range chunks {
			if c[len(c)-1] != '\n' && !strings.HasSuffix(got.String()+string(c), "last") {
				t.Fatalf("%s: a chunk ends inside a line: %q", name, c[max(0, len(c)-10):])
			}
			got.Write(c)
			select {
			case free <- c[:0]:
			default:
			}
		}
		if err := <-errc; err != nil || got.String() != in {
			t.Fatalf("%s: %v, %d bytes of %d", name, err, got.Len(), len(in))
		}
	}
	chunks := make(chan []byte)
	errc := make(chan error, 1)
	go func() {
		errc <- readChunks(context.Background(), io.MultiReader(strings.NewReader("ok\n"), iotest.HalfReader(io.LimitReader(neverEnding('x'), maxLineBytes+2))), chunks, nil)
	}()
	for range chunks {
	}
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "a line of more than") {
		t.Fatalf("a line past the bound: %v", err)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestProduce_Base64IsAsStrictAsTheServer: --base64 takes what the
// server's JSON produce takes (standard, padded, strict, no line breaks)
// and refuses the rest, so a line means the same bytes by either path.
func TestProduce_Base64IsAsStrictAsTheServer(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" with ok false: refused
		ok   bool
	}{
		{"dmFsdWU=", "value", true},
		{"", "", true},
		{"dmFsdWU", "", false},    // no padding
		{"dmFsdWV=", "", false},   // bits past the last byte set
		{"dmFs\rdWU=", "", false}, // a carriage return inside
		{"dmFsdWU=\r", "", false}, // a CRLF line's \r
		{"dmFs\ndWU=", "", false}, // a line feed inside
		{"dmFsdWU=!", "", false},  // not base64
	} {
		got, err := decodeBase64([]byte(tc.in))
		if tc.ok != (err == nil) || (tc.ok && string(got) != tc.want) {
			t.Errorf("decodeBase64(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
