package httpapi

import (
	"bytes"
	"testing"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/internal/testmem"
)

// TestDecodeBatch_ATinyBodyTakesATinyBuffer: a 3-byte binary produce body
// is decoded with buffers the size its Content-Length says (or small ones
// when it says none), not 64 KiB each: ten thousand such requests must
// not hold memory the in-flight byte budget never sees.
func TestDecodeBatch_ATinyBodyTakesATinyBuffer(t *testing.T) {
	body := api.AppendRecord(nil, nil, []byte("x"))
	for _, size := range []int64{int64(len(body)), -1} {
		var n int
		var err error
		got := testmem.Allocated(func() {
			recs, e := decodeBatch(bytes.NewReader(body), size)
			n, err = len(recs), e
		})
		if err != nil || n != 1 {
			t.Fatalf("Content-Length %d: %d records, %v", size, n, err)
		}
		if got > 16<<10 {
			t.Fatalf("Content-Length %d: decoding a 3-byte body allocated %d bytes; want at most 16 KiB", size, got)
		}
	}
}
