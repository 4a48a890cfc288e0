package bench

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
)

// Records makes the n records of a workload from seq on, each size bytes.
// A record is JSON-like text (an order event with varying ids, amounts and
// names) cut or padded to size, so a codec meets what a broker carries,
// not zeros or random bytes. Record seq is the same in every run.
func Records(seq int64, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = Record(seq+int64(i), size)
	}
	return out
}

var (
	names  = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"}
	states = []string{"created", "paid", "packed", "shipped", "delivered", "returned"}
	skus   = []string{"SKU-1042", "SKU-2217", "SKU-3390", "SKU-4051", "SKU-5873", "SKU-6605"}
)

// Record is record seq of size bytes.
func Record(seq int64, size int) []byte {
	rng := rand.New(rand.NewPCG(uint64(seq), 0x6e61726164))
	b := make([]byte, 0, size+160)
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	for len(b) < size {
		b = fmt.Appendf(b, `,"order":{"id":"ord-%08d","customer":%q,"state":%q,"sku":%q,"qty":%d,"amount":%d.%02d}`,
			rng.IntN(1e8), names[rng.IntN(len(names))], states[rng.IntN(len(states))], skus[rng.IntN(len(skus))],
			1+rng.IntN(9), rng.IntN(5000), rng.IntN(100))
	}
	b = append(b[:size-1], '}')
	return b
}

// Verifier checks that an engine gave back exactly the records written to
// it: the count, the bytes, a sum of per-record checksums that no missing,
// duplicated or changed record leaves equal by accident (short of a
// crafted collision), and for one producer the order too.
type Verifier struct {
	count int64
	bytes int64
	sum   uint64
	// ordered hashes the records in the order counted: for one producer,
	// whose records an engine must give back in commit order, it also
	// catches a swap, or a lost record whose identical twin (the workload
	// cycles through its records) came back twice.
	ordered uint64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Add counts one record.
func (v *Verifier) Add(rec []byte) {
	v.count++
	v.bytes += int64(len(rec))
	c := uint64(crc32.Checksum(rec, castagnoli))
	v.sum += c*0x9e3779b97f4a7c15 + uint64(len(rec))
	v.ordered = (v.ordered^c)*0x100000001b3 + uint64(v.count)
}

// Merge adds what another verifier counted; the order across them is
// unknown, so the merged verifier no longer checks order.
func (v *Verifier) Merge(o Verifier) {
	v.count += o.count
	v.bytes += o.bytes
	v.sum += o.sum
	v.ordered = 0
}

// Records is how many records were counted; Bytes their size.
func (v Verifier) Records() int64 { return v.count }
func (v Verifier) Bytes() int64   { return v.bytes }

// Check says how read differs from v, the records written.
func (v Verifier) Check(read Verifier) error {
	if v.ordered == 0 { // counted by more than one producer: in any order
		read.ordered = 0
	}
	if read != v {
		return fmt.Errorf("read back %d records (%d bytes, sum %x), wrote %d (%d bytes, sum %x)",
			read.count, read.bytes, read.sum, v.count, v.bytes, v.sum)
	}
	return nil
}
