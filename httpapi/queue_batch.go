package httpapi

import (
	"bufio"
	"net/http"
	"strconv"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/runtime"
)

// writeConsumeBatch answers a consume's leased records in the binary
// consume encoding (api.ConsumeBatchWriter; docs/http-api.md, "Queue
// consume"), through a records answer's write buffer: an answer that fits
// it goes out whole, a larger one as the buffer fills. A group is a run
// of records under one partition, lease id and deadline: the node leases
// from a partition once a consume, so a partition's records make one
// group. Nothing leased is an empty answer. The Narad-Records header says
// how many records the body holds: the records are all leased before a
// byte is written, and a body cut between two groups is told from a
// whole one only by that count.
//
// The records are leased already: a client gone while they are written
// cuts the answer (its leases run out), as a JSON answer's.
func writeConsumeBatch(w http.ResponseWriter, recs []runtime.LeasedRecord) {
	out := sentWriter{ResponseWriter: w}
	bw := answerWriters.Get().(*bufio.Writer)
	bw.Reset(&out)
	defer func() {
		bw.Reset(nil)
		answerWriters.Put(bw)
	}()
	w.Header().Set("Content-Type", api.BatchMediaType)
	w.Header().Set(api.HeaderRecords, strconv.Itoa(len(recs))) // the body has no end marker
	cw := api.NewConsumeBatchWriter(bw)
	for start := 0; start < len(recs); {
		first := recs[start]
		end := start + 1
		for end < len(recs) && sameLease(recs[end], first) {
			end++
		}
		cw.Group(api.ConsumeGroup{Partition: first.Partition, LeaseID: first.LeaseID, LeaseDeadlineMs: first.LeaseDeadline.UnixMilli(), Records: end - start})
		for _, r := range recs[start:end] {
			cw.Record(api.BatchRecord{Offset: r.Offset, CommittedAtMs: r.CommittedAtUnixMs, Key: r.Key, Value: r.Value})
		}
		start = end
	}
	bw.Flush()
}

// sameLease reports that a and b were leased together: one partition,
// one lease id, one deadline.
func sameLease(a, b runtime.LeasedRecord) bool {
	return a.Partition == b.Partition && a.LeaseID == b.LeaseID && a.LeaseDeadline.UnixMilli() == b.LeaseDeadline.UnixMilli()
}
