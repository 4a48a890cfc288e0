package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/runtime"
	"go.uber.org/zap"
)

// The move endpoints: the operator's (ask for a move, list, cancel), and
// the internal ones a move's new owner calls on the old owner to pull the
// partition (docs/http-api.md, "Moves"). The internal ones carry the
// cluster's token like every call.

func (a *Handler) registerMoves() {
	a.mux.HandleFunc("POST /v1/topics/{topic}/partitions/{p}/move", a.requestMove)
	a.mux.HandleFunc("GET /v1/moves", a.listMoves)
	a.mux.HandleFunc("DELETE /v1/moves/{id}", a.cancelMove)
	a.mux.HandleFunc("GET /v1/nodes", a.listNodes)
	a.mux.HandleFunc("POST /v1/nodes/{id}/drain", a.drainNode)
	a.mux.HandleFunc("DELETE /v1/nodes/{id}/drain", a.drainNode)
	a.mux.HandleFunc("POST /v1/nodes/{id}/lost", a.markLost)
	a.mux.HandleFunc("GET /v1/internal/moves/{id}/listing", a.moveListing)
	a.mux.HandleFunc("GET /v1/internal/moves/{id}/files/{name}", a.moveFile)
	a.mux.HandleFunc("POST /v1/internal/moves/{id}/freeze", a.freezeMove)
	a.mux.HandleFunc("POST /v1/internal/partitions/{topic}/{p}/release", a.releasePartition)
}

// inCluster answers 404 not_a_cluster on a node alone.
func (a *Handler) inCluster(w http.ResponseWriter) bool {
	if a.opts.Cluster == nil {
		writeError(w, http.StatusNotFound, "not_a_cluster", "this node serves alone (--metastore local): nothing moves")
		return false
	}
	return true
}

func (a *Handler) requestMove(w http.ResponseWriter, r *http.Request) {
	if !a.inCluster(w) {
		return
	}
	topic, ok := topicOf(w, r)
	if !ok {
		return
	}
	p, ok := partitionParam(r)
	if !ok {
		writeError(w, http.StatusNotFound, "partition_not_found", fmt.Sprintf("no partition %q: partitions are numbered from 0", r.PathValue("p")))
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	var body struct {
		To *string `json:"to"`
	}
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return
	}
	if body.To == nil {
		writeError(w, http.StatusBadRequest, "invalid_body", "to (the node id to move the partition to) is required")
		return
	}
	mv, err := a.opts.Cluster.Metastore().RequestMove(r.Context(), topic, p, *body.To)
	if errors.Is(err, cluster.ErrMoveRefused) {
		writeError(w, http.StatusConflict, "move_refused", moveRefusal(err))
		return
	}
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	a.logger.Info("partition move requested", zap.String("topic", topic), zap.Int("partition", p), zap.String("from", mv.From), zap.String("to", mv.To), zap.String("move", mv.ID))
	writeJSON(w, http.StatusAccepted, map[string]cluster.Move{"move": mv})
}

// moveRefusal says why a move was refused, in the request's terms.
func moveRefusal(err error) string {
	return strings.TrimPrefix(err.Error(), "cluster: ")
}

func (a *Handler) listMoves(w http.ResponseWriter, r *http.Request) {
	if !a.inCluster(w) {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string][]cluster.Move{"moves": a.opts.Cluster.Metastore().Moves()})
}

func (a *Handler) cancelMove(w http.ResponseWriter, r *http.Request) {
	if !a.inCluster(w) {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	mv, ok := a.findMove(w, r, fmt.Sprintf("no move %q under way", r.PathValue("id")))
	if !ok {
		return
	}
	if err := a.opts.Cluster.Metastore().CancelMove(r.Context(), mv); err != nil {
		if errors.Is(err, cluster.ErrMoveChanged) {
			writeError(w, http.StatusConflict, "move_changed", "the move changed meanwhile (completed, or cancelled); see GET /v1/moves")
			return
		}
		a.writeNodeError(w, r, err)
		return
	}
	a.logger.Info("partition move cancelled", zap.String("move", mv.ID), zap.String("topic", mv.Topic), zap.Int("partition", mv.Partition))
	w.WriteHeader(http.StatusNoContent)
}

func (a *Handler) listNodes(w http.ResponseWriter, r *http.Request) {
	if !a.inCluster(w) {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": a.opts.Cluster.Metastore().Nodes(), "lost": a.opts.Cluster.Metastore().LostNodes()})
}

// markLost marks a node that is not live lost: once its fence horizon
// has passed, the assigner gives its partitions to live nodes, empty
// (cluster/lost.go). What only its disk held is given up: an operator's
// call for a node that will not come back.
func (a *Handler) markLost(w http.ResponseWriter, r *http.Request) {
	id, ok := a.nodeParam(w, r)
	if !ok {
		return
	}
	if err := a.opts.Cluster.Metastore().MarkLost(r.Context(), id, time.Now()); err != nil {
		if errors.Is(err, cluster.ErrNodeIDLive) {
			writeError(w, http.StatusConflict, "node_live", fmt.Sprintf("node %q is live: only a node that is not can be marked lost (stop it, or move its partitions)", id))
			return
		}
		if errors.Is(err, cluster.ErrUnknownNode) {
			writeError(w, http.StatusNotFound, "node_not_found", fmt.Sprintf("no node ever registered as %q", id))
			return
		}
		a.writeNodeError(w, r, err)
		return
	}
	a.logger.Warn("node marked lost: its partitions go to live nodes, empty, once its fence horizon has passed", zap.String("node", id))
	w.WriteHeader(http.StatusNoContent)
}

// nodeParam is a call about one node of the cluster's: its id, valid,
// or the answer already written.
func (a *Handler) nodeParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	if !a.inCluster(w) {
		return "", false
	}
	if _, ok := query(w, r); !ok {
		return "", false
	}
	id := r.PathValue("id")
	if err := datadir.ValidateNodeID(id); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_parameter", err.Error())
		return "", false
	}
	return id, true
}

// drainNode marks a node draining (POST) or no longer (DELETE): the
// assigner moves its partitions off, or gives it its share again.
func (a *Handler) drainNode(w http.ResponseWriter, r *http.Request) {
	id, ok := a.nodeParam(w, r)
	if !ok {
		return
	}
	draining := r.Method == http.MethodPost
	if err := a.opts.Cluster.Metastore().SetDraining(r.Context(), id, draining); err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	a.logger.Info("node drain mark changed", zap.String("node", id), zap.Bool("draining", draining))
	w.WriteHeader(http.StatusNoContent)
}

// transferBody is a move's listing of the old owner's files
// (cluster.TransferListing), as the internal move endpoints answer it.
type transferBody struct {
	Move          cluster.Move  `json:"move"`
	Segments      []segmentBody `json:"segments"`
	HighWatermark int64         `json:"high_watermark"`
	Known         bool          `json:"known"`
	Cursors       []cursorBody  `json:"cursors"`
	Consumer      []segmentBody `json:"consumer"`
	// Dictionaries: the topic's dictionary files; absent from an old
	// owner that has none to name.
	Dictionaries []segmentBody `json:"dictionaries,omitempty"`
}

type segmentBody struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

type cursorBody struct {
	Name     string `json:"name"`
	Position int64  `json:"position"`
}

func newTransferBody(l cluster.TransferListing) transferBody {
	out := transferBody{Move: l.Move, HighWatermark: l.HighWatermark, Known: l.Known, Segments: []segmentBody{}, Cursors: []cursorBody{}, Consumer: []segmentBody{}}
	for _, f := range l.Consumer {
		out.Consumer = append(out.Consumer, segmentBody(f))
	}
	for _, f := range l.Dictionaries {
		out.Dictionaries = append(out.Dictionaries, segmentBody(f))
	}
	for _, s := range l.Segments {
		out.Segments = append(out.Segments, segmentBody(s))
	}
	for _, c := range l.Cursors {
		out.Cursors = append(out.Cursors, cursorBody(c))
	}
	return out
}

// listing is the body as the puller's cluster.TransferListing.
func (b transferBody) listing() cluster.TransferListing {
	out := cluster.TransferListing{Move: b.Move, HighWatermark: b.HighWatermark, Known: b.Known}
	for _, f := range b.Consumer {
		out.Consumer = append(out.Consumer, cluster.TransferFile(f))
	}
	for _, f := range b.Dictionaries {
		out.Dictionaries = append(out.Dictionaries, cluster.TransferFile(f))
	}
	for _, s := range b.Segments {
		out.Segments = append(out.Segments, cluster.TransferFile(s))
	}
	for _, c := range b.Cursors {
		out.Cursors = append(out.Cursors, cluster.TransferCursor(c))
	}
	return out
}

// findMove finds the move under way named by the path's id, in this
// node's replica or, when it does not hold it, once the replica caught up
// with etcd (a move asked through another node a moment before); ok is
// false when it wrote the answer: 404 move_not_found saying notFound when
// etcd holds no such move either, 503 when the catch-up failed.
func (a *Handler) findMove(w http.ResponseWriter, r *http.Request, notFound string) (cluster.Move, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), settleWait)
	defer cancel()
	mv, found, err := a.opts.Cluster.Metastore().FindMove(ctx, r.PathValue("id"))
	switch {
	case err != nil:
		a.writeNotCaughtUp(w, r, err)
		return cluster.Move{}, false
	case !found:
		writeError(w, http.StatusNotFound, "move_not_found", notFound)
		return cluster.Move{}, false
	}
	return mv, true
}

// outgoingMove finds a move of a partition this node owns by its id
// (cluster.Participant.OutgoingMove); ok is false when it wrote the
// answer: 404 move_not_found, or 503 when this node could not catch up
// with etcd to look for it.
func (a *Handler) outgoingMove(w http.ResponseWriter, r *http.Request) (cluster.Move, bool) {
	if !a.inCluster(w) {
		return cluster.Move{}, false
	}
	mv, err := a.opts.Cluster.OutgoingMove(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, cluster.ErrNotCaughtUp):
		a.writeNotCaughtUp(w, r, err)
		return cluster.Move{}, false
	case errors.Is(err, cluster.ErrMoveNotFound):
		writeError(w, http.StatusNotFound, "move_not_found", fmt.Sprintf("no move %q out of this node under way", r.PathValue("id")))
		return cluster.Move{}, false
	case err != nil:
		a.writeNodeError(w, r, err)
		return cluster.Move{}, false
	}
	return mv, true
}

// writeNotCaughtUp answers a call about a move this node could not catch
// up with etcd to look for.
func (a *Handler) writeNotCaughtUp(w http.ResponseWriter, r *http.Request, err error) {
	a.logger.Warn("looking for a move in etcd", zap.String("move", r.PathValue("id")), zap.Error(err))
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "unavailable", "this node could not catch up with etcd to look for the move; retry")
}

// writeMoveError answers the failure of a move's step on this node: 409
// move_changed saying how (cluster.ErrMoveChanged), else as any node
// error.
func (a *Handler) writeMoveError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, cluster.ErrMoveChanged) {
		writeError(w, http.StatusConflict, "move_changed", strings.TrimPrefix(err.Error(), cluster.ErrMoveChanged.Error()+": "))
		return
	}
	a.writeNodeError(w, r, err)
}

// moveListing lists the partition's files while its old owner still
// serves it (cluster.Participant.MoveListing).
func (a *Handler) moveListing(w http.ResponseWriter, r *http.Request) {
	if _, ok := query(w, r); !ok {
		return
	}
	mv, ok := a.outgoingMove(w, r)
	if !ok {
		return
	}
	l, err := a.opts.Cluster.MoveListing(r.Context(), mv)
	if err != nil {
		a.writeMoveError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newTransferBody(l))
}

// moveFile streams the first size bytes of one file of the listing.
func (a *Handler) moveFile(w http.ResponseWriter, r *http.Request) {
	q, ok := query(w, r, "size")
	if !ok {
		return
	}
	mv, ok := a.outgoingMove(w, r)
	if !ok {
		return
	}
	size, ok := decimal(q.Get("size"))
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_parameter", "size must be the file's size in the listing")
		return
	}
	f, err := a.opts.Cluster.OpenMoveFile(r.Context(), mv, r.PathValue("name"), size)
	if err != nil {
		a.writeMoveError(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, f); err != nil {
		a.logger.Warn("streaming a file to a move's new owner", zap.String("move", mv.ID), zap.Error(err))
	}
}

// freezeMove stops this node serving the partition and lists its final
// files (cluster.Participant.FreezeMove).
func (a *Handler) freezeMove(w http.ResponseWriter, r *http.Request) {
	if _, ok := query(w, r); !ok {
		return
	}
	mv, ok := a.outgoingMove(w, r)
	if !ok {
		return
	}
	l, err := a.opts.Cluster.FreezeMove(r.Context(), mv)
	if err != nil {
		a.writeMoveError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newTransferBody(l))
}

// releasePartition drops this node's copy of a partition once etcd
// confirms another node owns it (a move's new owner calls it after the
// move completed).
func (a *Handler) releasePartition(w http.ResponseWriter, r *http.Request) {
	if !a.inCluster(w) {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	topic, ok := topicOf(w, r)
	if !ok {
		return
	}
	p, ok := partitionParam(r)
	if !ok {
		writeError(w, http.StatusNotFound, "partition_not_found", "no such partition")
		return
	}
	if err := a.opts.Cluster.ReleasePartition(r.Context(), topic, p); err != nil {
		if errors.Is(err, runtime.ErrAssigned) || errors.Is(err, runtime.ErrReceiveInProgress) {
			writeError(w, http.StatusConflict, "move_changed", "the partition is this node's, or moving here")
			return
		}
		a.writeNodeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
