package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// cursorOf reads {topic} and {name}, answering the error itself when
// either is invalid.
func cursorOf(w http.ResponseWriter, r *http.Request) (topic, name string, ok bool) {
	if topic, ok = topicOf(w, r); !ok {
		return "", "", false
	}
	name = r.PathValue("name")
	if err := wire.ValidateCursorName(name); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeInvalidCursorName, "invalid "+strings.TrimPrefix(err.Error(), wire.ErrBadName.Error()+": "))
		return "", "", false
	}
	return topic, name, true
}

// cursorPartitionOf reads {topic}, {name} and {p}, answering the error
// itself when one is invalid.
func cursorPartitionOf(w http.ResponseWriter, r *http.Request) (topic, name string, p int, ok bool) {
	if topic, name, ok = cursorOf(w, r); !ok {
		return "", "", 0, false
	}
	if p, ok = partitionParam(r); !ok {
		writeError(w, http.StatusNotFound, api.CodePartitionNotFound, fmt.Sprintf("no partition %q: partitions are numbered from 0", r.PathValue("p")))
	}
	return topic, name, p, ok
}

// writeCursorError answers the cursor's own errors, and the node's.
func (a *Handler) writeCursorError(w http.ResponseWriter, r *http.Request, name string, err error) {
	if errors.Is(err, runtime.ErrCursorNotFound) {
		writeError(w, http.StatusNotFound, api.CodeCursorNotFound, fmt.Sprintf("topic %q has no cursor %q", r.PathValue("topic"), name))
		return
	}
	a.writeNodeError(w, r, err)
}

func (a *Handler) writeCursor(w http.ResponseWriter, r *http.Request, status int, topic, name string) {
	positions, err := a.node.Cursor(r.Context(), topic, name)
	if err != nil {
		a.writeCursorError(w, r, name, err)
		return
	}
	out := api.Cursor{Name: name, Partitions: make([]api.CursorPosition, len(positions))}
	for i, p := range positions {
		out.Partitions[i] = api.CursorPosition(p)
	}
	writeJSON(w, status, out)
}

// putCursor makes a fan-out cursor on every partition of the topic.
func (a *Handler) putCursor(w http.ResponseWriter, r *http.Request) {
	topic, name, ok := cursorOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	var body api.CreateCursorRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &body); err != nil {
			a.badBody(w, err)
			return
		}
	}
	start := runtime.CursorEarliest
	if body.From != nil {
		switch *body.From {
		case "earliest":
		case "latest":
			start = runtime.CursorLatest
		default:
			writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("from must be \"earliest\" or \"latest\", not %q", *body.From))
			return
		}
	}
	created, err := a.node.CreateCursor(r.Context(), topic, name, start)
	if err != nil {
		a.writeCursorError(w, r, name, err)
		return
	}
	if created {
		a.logger.Info("cursor created", zap.String("topic", topic), zap.String("cursor", name))
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.writeCursor(w, r, status, topic, name)
}

func (a *Handler) getCursor(w http.ResponseWriter, r *http.Request) {
	topic, name, ok := cursorOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	a.writeCursor(w, r, http.StatusOK, topic, name)
}

func (a *Handler) deleteCursor(w http.ResponseWriter, r *http.Request) {
	topic, name, ok := cursorOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	if err := a.node.DeleteCursor(r.Context(), topic, name); err != nil {
		a.writeCursorError(w, r, name, err)
		return
	}
	a.logger.Info("cursor deleted", zap.String("topic", topic), zap.String("cursor", name))
	w.WriteHeader(http.StatusNoContent)
}

// commitCursor sets a cursor's position in one partition.
func (a *Handler) commitCursor(w http.ResponseWriter, r *http.Request) {
	topic, name, p, ok := cursorPartitionOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	var body api.CommitCursorRequest
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return
	}
	if body.Position == nil {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, "position is required: the next offset the cursor reads, from 0 up to the high watermark")
		return
	}
	if *body.Position < 0 {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("position must be from 0 up to the high watermark, not %d", *body.Position))
		return
	}
	err := a.node.CommitCursor(r.Context(), topic, name, p, *body.Position)
	if errors.Is(err, partition.ErrBeyondHighWatermark) {
		writeError(w, http.StatusBadRequest, api.CodeInvalidOffset, fmt.Sprintf("position %d is beyond the high watermark (%d now)", *body.Position, a.hwm(r, topic, p, 0)))
		return
	}
	if err != nil {
		a.writeCursorError(w, r, name, err)
		return
	}
	writeJSON(w, http.StatusOK, api.CommitCursorAnswer{Position: *body.Position})
}

// readCursor reads a partition through a cursor, advancing it unless
// advance=false; at the high watermark with wait_ms it long-polls on the
// log's broadcast channel, as a fetch does.
func (a *Handler) readCursor(w http.ResponseWriter, r *http.Request) {
	topic, name, p, ok := cursorPartitionOf(w, r)
	if !ok {
		return
	}
	q, ok := query(w, r, "max_records", "max_bytes", "wait_ms", "encoding", "advance")
	if !ok {
		return
	}
	rp, ok := readParamsOf(w, q)
	if !ok {
		return
	}
	maxRecords, maxBytes, waitMs, b64 := rp.maxRecords, rp.maxBytes, rp.waitMs, rp.b64
	advance := true
	switch v := q.Get("advance"); v {
	case "", "true":
	case "false":
		advance = false
	default:
		writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, fmt.Sprintf("advance must be true or false, not %q", v))
		return
	}
	inc, ok := a.readIncarnation(w, r, q, topic)
	if !ok {
		return
	}
	deadline := time.Now().Add(time.Duration(waitMs) * time.Millisecond)
	var res runtime.CursorRead
	skipped := int64(0)
	l, err := a.node.Log(r.Context(), topic, p)
	if err != nil {
		a.writeCursorError(w, r, name, err)
		return
	}
	// Each read holds the answer budget, from before it reads until its
	// answer is written; a long poll's wait, which reads nothing, holds
	// none (found by review: idle polls held the whole budget).
	release := func() {}
	defer func() { release() }()
	for first := true; ; first = false {
		wake := l.NotifyC() // fetched before the read, so no commit is missed
		var taken func()
		if first {
			if taken, ok = a.admitAnswer(w, maxBytes); !ok {
				return // answered 503 busy: nothing was read
			}
		} else if taken, ok = a.takeAnswer(maxBytes); !ok {
			// Woken, but the budget is full: the poll ends with what it
			// has (no records), as at its deadline.
			break
		}
		release = taken
		res, err = a.node.ReadCursor(r.Context(), topic, name, p, maxRecords, maxBytes, advance)
		if err != nil {
			a.writeCursorError(w, r, name, err)
			return
		}
		if advance {
			skipped += res.Skipped // each read starts past what the last stepped over
		} else {
			skipped = res.Skipped // a peek starts from the same place every time
		}
		if len(res.Records) > 0 || waitMs == 0 || res.Next < res.HighWatermark {
			break
		}
		release()
		release = func() {}
		var end waitEnd
		if l, end = a.waitForCommit(r, topic, p, l, wake, deadline, inc); end != waitWoken {
			break
		}
	}
	if !a.stillIncarnation(w, r, topic, inc) {
		return
	}
	s := newRecordStream(w, false, b64, maxBytes)
	s.writeAll(len(res.Records), func(i int) (partition.ReadRecord, string) { return res.Records[i], "" })
	s.finish(res.Next, res.HighWatermark, strconv.AppendInt(append(boundaryJSON(res.Next, res.HighWatermark, inc), `,"skipped":`...), skipped, 10))
}
