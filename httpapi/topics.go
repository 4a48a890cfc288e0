package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/wire"
)

// topicRequest reads {topic} and its body, answering the error itself
// when either is invalid.
func (a *Handler) topicRequest(w http.ResponseWriter, r *http.Request) (name string, body api.TopicRequest, ok bool) {
	name, ok = topicOf(w, r)
	if !ok {
		return "", body, false
	}
	if _, ok := query(w, r); !ok {
		return "", body, false
	}
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return "", body, false
	}
	return name, body, true
}

// topicOf reads {topic}, answering 400 invalid_topic_name itself when it
// is not a valid name: no path is built from it then.
func topicOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("topic")
	if wire.ValidateTopicName(name) != nil {
		writeError(w, http.StatusBadRequest, api.CodeInvalidTopicName, nameProblem(name))
		return "", false
	}
	return name, true
}

func (a *Handler) putTopic(w http.ResponseWriter, r *http.Request) {
	name, body, ok := a.topicRequest(w, r)
	if !ok {
		return
	}
	var retention runtime.Retention
	if body.RetentionMs != nil {
		retention.Ms = *body.RetentionMs
	}
	if body.RetentionBytes != nil {
		retention.Bytes = *body.RetentionBytes
	}
	if msg := retentionProblem(retention); msg != "" {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, msg)
		return
	}
	switch {
	case body.Partitions == nil:
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("partitions is required: an integer from 1 to %d", maxPartitions))
		return
	case *body.Partitions < 1 || *body.Partitions > maxPartitions:
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("partitions must be from 1 to %d, not %d", maxPartitions, *body.Partitions))
		return
	}
	if msg := dictionaryAfterProblem(body.DictionaryAfter); msg != "" {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, msg)
		return
	}
	_, created, err := a.node.CreateTopic(r.Context(), name, *body.Partitions, retention)
	if err == nil && body.DictionaryAfter != nil {
		_, err = a.node.SetDictionaryAfter(r.Context(), name, *body.DictionaryAfter)
	}
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.describe(w, r, name, status)
}

func (a *Handler) listTopics(w http.ResponseWriter, r *http.Request) {
	if _, ok := query(w, r); !ok {
		return
	}
	topics, err := a.ms.Topics(r.Context())
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	out := api.TopicList{Topics: []api.TopicDescription{}}
	for _, t := range topics {
		d, err := a.description(r, t.Name)
		if err != nil {
			continue // deleted meanwhile
		}
		out.Topics = append(out.Topics, d)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *Handler) getTopic(w http.ResponseWriter, r *http.Request) {
	if _, ok := query(w, r); !ok {
		return
	}
	a.describe(w, r, r.PathValue("topic"), http.StatusOK)
}

func (a *Handler) patchTopic(w http.ResponseWriter, r *http.Request) {
	name, body, ok := a.topicRequest(w, r)
	if !ok {
		return
	}
	switch {
	case body.Partitions != nil:
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, "partitions cannot change; PATCH takes retention_ms, retention_bytes and dictionary_after")
		return
	case body.RetentionMs == nil && body.RetentionBytes == nil && body.DictionaryAfter == nil:
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, "give retention_ms, retention_bytes (0: no bound), dictionary_after (0: never), or several")
		return
	}
	// Everything is checked before anything is written: a refused PATCH
	// changes nothing.
	if msg := dictionaryAfterProblem(body.DictionaryAfter); msg != "" {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, msg)
		return
	}
	given := runtime.Retention{Ms: deref(body.RetentionMs), Bytes: deref(body.RetentionBytes)}
	if msg := retentionProblem(given); msg != "" {
		writeError(w, http.StatusBadRequest, api.CodeInvalidBody, msg)
		return
	}
	// The retention first: its merge with the stored bounds is checked
	// under the metastore's lock, so a refusal there comes before
	// dictionary_after is written.
	if body.RetentionMs != nil || body.RetentionBytes != nil {
		// A bound not given keeps its value; the merge happens in the
		// metastore, so two PATCHes of different bounds at once both land.
		_, err := a.node.UpdateRetention(r.Context(), name, func(cur runtime.Retention) (runtime.Retention, error) {
			if body.RetentionMs != nil {
				cur.Ms = given.Ms
			}
			if body.RetentionBytes != nil {
				cur.Bytes = given.Bytes
			}
			return cur, nil
		})
		if err != nil {
			a.writeNodeError(w, r, err)
			return
		}
	}
	if body.DictionaryAfter != nil {
		if _, err := a.node.SetDictionaryAfter(r.Context(), name, *body.DictionaryAfter); err != nil {
			a.writeNodeError(w, r, err)
			return
		}
	}
	a.describe(w, r, name, http.StatusOK)
}

func (a *Handler) deleteTopic(w http.ResponseWriter, r *http.Request) {
	if _, ok := query(w, r); !ok {
		return
	}
	if err := a.node.DeleteTopic(r.Context(), r.PathValue("topic")); err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Handler) describe(w http.ResponseWriter, r *http.Request, name string, status int) {
	d, err := a.description(r, name)
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	writeJSON(w, status, d)
}

// description describes a topic; a partition whose boundary is not on
// disk (closed after a crash) is opened to learn it, never shown as 0. A
// cluster's node names each partition's owner, and marks those another
// node serves: their figures are that node's to give.
func (a *Handler) description(r *http.Request, name string) (api.TopicDescription, error) {
	rec, infos, err := a.node.Describe(r.Context(), name)
	if err != nil {
		return api.TopicDescription{}, err
	}
	d := api.TopicDescription{Name: rec.Name, Incarnation: string(rec.Incarnation), RetentionMs: rec.RetentionMs,
		RetentionBytes: rec.RetentionBytes, DictionaryAfter: rec.DictionaryAfter, Partitions: []api.PartitionDescription{}}
	for _, p := range infos {
		var owner *api.Owner
		if a.opts.Owners != nil {
			if loc, ok := a.opts.Owners.Locate(name, p.Partition); ok {
				owner = &api.Owner{NodeID: loc.NodeID, Addr: loc.Addr}
			}
			if mine, err := a.ms.Assigned(r.Context(), name, p.Partition); err != nil || !mine {
				d.Partitions = append(d.Partitions, api.PartitionDescription{Partition: p.Partition, Owner: owner, Remote: true})
				continue
			}
		}
		if !p.Known {
			hwm, err := a.node.HighWatermark(r.Context(), name, p.Partition)
			if err != nil {
				return d, err
			}
			p.HighWatermark = hwm
		}
		d.Partitions = append(d.Partitions, api.PartitionDescription{Partition: p.Partition, StartOffset: p.StartOffset,
			HighWatermark: p.HighWatermark, Segments: p.Segments, Bytes: p.Bytes, Owner: owner})
	}
	return d, nil
}

// badBody answers an unreadable request body: 413 past the cap (of the
// body, or of a batch's records), else 400.
func (a *Handler) badBody(w http.ResponseWriter, err error) {
	if isTooLarge(err) || errors.Is(err, errBatchTooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeBatchTooLarge, err.Error())
		return
	}
	writeError(w, http.StatusBadRequest, api.CodeInvalidBody, err.Error())
}

// retentionProblem says what is wrong with retention bounds, or "".
func retentionProblem(r runtime.Retention) string {
	switch {
	case r.Ms < 0 || r.Ms > runtime.MaxRetentionMs:
		return fmt.Sprintf("retention_ms must be from 0 (no age bound) to %d, not %d", runtime.MaxRetentionMs, r.Ms)
	case r.Bytes < 0:
		return fmt.Sprintf("retention_bytes must be 0 (no size bound) or more, not %d", r.Bytes)
	}
	return ""
}

// dictionaryAfterProblem says what is wrong with a dictionary_after given,
// or "".
func dictionaryAfterProblem(v *int64) string {
	if v == nil || *v == 0 || (*v >= runtime.MinDictionaryAfter && *v <= runtime.MaxDictionaryAfter) {
		return ""
	}
	return fmt.Sprintf("dictionary_after must be 0 (never) or from %d to %d records, not %d", runtime.MinDictionaryAfter, int64(runtime.MaxDictionaryAfter), *v)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
