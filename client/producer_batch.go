package client

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
)

// batch is the records of one partition sent as one request, encoded as
// they are taken (the binary batch encoding, api.AppendRecord): the body
// is what goes on the wire, and the caller's slices are free once
// Produce returns.
//
// Invariants: records == len(done); size == len(body), the bytes it
// holds of the producer's buffer. The fields from out on are its
// sender's alone.
type batch struct {
	id      uint64 // unique in its producer, from 1
	part    int
	body    []byte
	records int
	size    int64
	done    []func(Result) // one a record, nil where the caller gave none
	opened  time.Time      // when it took its first record: its linger runs from here

	out      *outcome // the answer to its request, or what stands for one; nil while it is awaited or unsent
	final    error    // it is not to be sent (again): settle it with this when it is the oldest
	attempts int      // sends again after nothing done (or an ambiguous failure, with RetryAmbiguous)
	hops     int      // 421 answers followed in a row
}

// newBatch is a batch of partition into body, its callbacks' slice sized
// for records.
func newBatch(id uint64, partition int, body []byte, records int) *batch {
	return &batch{id: id, part: partition, opened: time.Now(), body: body, done: make([]func(Result), 0, records+records/8)}
}

// bodies gives batches their bodies: one as large as the partition's
// last batch (a body grown record by record was copied a dozen times on
// its way to 1 MiB), or for a partition's first batch of keyless records
// the last keyless batch's, or one a settled batch gave back, so a producer's
// steady state allocates little. Only bodies no link can still be
// writing go back: a pipelined link writes a request whole before its
// answer can come; the caller's transport may go on reading a body
// after its answer.
type bodies struct {
	pool    sync.Pool
	initial int // a body's capacity when its partition had no batch yet
	keep    int // a body larger than this is not kept, nor made
}

// get returns an empty body for a batch expected to take about size
// bytes (0: unknown).
func (bs *bodies) get(size int) []byte {
	want := min(max(size+size/8, bs.initial), bs.keep)
	if b, ok := bs.pool.Get().(*[]byte); ok {
		if cap(*b) >= want {
			return (*b)[:0]
		}
		bs.pool.Put(b)
	}
	return make([]byte, 0, want)
}

func (bs *bodies) put(b []byte) {
	if cap(b) <= bs.keep {
		bs.pool.Put(&b)
	}
}

// add appends a record of size bytes (recordSize) and its done.
func (b *batch) add(r Record, done func(Result), size int64) {
	b.body = api.AppendRecord(b.body, r.Key, r.Value)
	b.records++
	b.size += size
	b.done = append(b.done, done)
}

// recordSize is a record's bytes in the binary batch encoding.
func recordSize(r Record) int {
	return uvarintLen(len(r.Key)) + len(r.Key) + uvarintLen(len(r.Value)) + len(r.Value)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}
