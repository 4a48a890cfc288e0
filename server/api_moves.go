package server

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

func (a *api) registerMoves() {
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
func (a *api) inCluster(w http.ResponseWriter) bool {
	if a.opts.cluster == nil {
		writeError(w, http.StatusNotFound, "not_a_cluster", "this node serves alone (--metastore local): nothing moves")
		return false
	}
	return true
}

func (a *api) requestMove(w http.ResponseWriter, r *http.Request) {
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
	mv, err := a.opts.cluster.ms.RequestMove(r.Context(), topic, p, *body.To)
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

func (a *api) listMoves(w http.ResponseWriter, r *http.Request) {
	if !a.inCluster(w) {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string][]cluster.Move{"moves": a.opts.cluster.ms.Moves()})
}

func (a *api) cancelMove(w http.ResponseWriter, r *http.Request) {
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
	if err := a.opts.cluster.ms.CancelMove(r.Context(), mv); err != nil {
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

func (a *api) listNodes(w http.ResponseWriter, r *http.Request) {
	if !a.inCluster(w) {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": a.opts.cluster.ms.Nodes(), "lost": a.opts.cluster.ms.LostNodes()})
}

// markLost marks a node that is not live lost: once its fence horizon
// has passed, the assigner gives its partitions to live nodes, empty
// (cluster/lost.go). What only its disk held is given up: an operator's
// call for a node that will not come back.
func (a *api) markLost(w http.ResponseWriter, r *http.Request) {
	id, ok := a.nodeParam(w, r)
	if !ok {
		return
	}
	if err := a.opts.cluster.ms.MarkLost(r.Context(), id, time.Now()); err != nil {
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
func (a *api) nodeParam(w http.ResponseWriter, r *http.Request) (string, bool) {
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
func (a *api) drainNode(w http.ResponseWriter, r *http.Request) {
	id, ok := a.nodeParam(w, r)
	if !ok {
		return
	}
	draining := r.Method == http.MethodPost
	if err := a.opts.cluster.ms.SetDraining(r.Context(), id, draining); err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	a.logger.Info("node drain mark changed", zap.String("node", id), zap.Bool("draining", draining))
	w.WriteHeader(http.StatusNoContent)
}

// transferBody is a move's listing of the old owner's files.
type transferBody struct {
	Move          cluster.Move  `json:"move"`
	Segments      []segmentBody `json:"segments"`
	HighWatermark int64         `json:"high_watermark"`
	Known         bool          `json:"known"`
	Cursors       []cursorBody  `json:"cursors"`
	Consumer      []segmentBody `json:"consumer"`
}

type segmentBody struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

type cursorBody struct {
	Name     string `json:"name"`
	Position int64  `json:"position"`
}

// findMove finds the move under way named by the path's id, in this
// node's replica or, when it does not hold it, once the replica caught up
// with etcd (a move asked through another node a moment before); ok is
// false when it wrote the answer: 404 move_not_found saying notFound when
// etcd holds no such move either, 503 when the catch-up failed.
func (a *api) findMove(w http.ResponseWriter, r *http.Request, notFound string) (cluster.Move, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), settleWait)
	defer cancel()
	mv, found, err := a.opts.cluster.ms.FindMove(ctx, r.PathValue("id"))
	switch {
	case err != nil:
		a.logger.Warn("looking for a move in etcd", zap.String("move", r.PathValue("id")), zap.Error(err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this node could not catch up with etcd to look for the move; retry")
		return cluster.Move{}, false
	case !found:
		writeError(w, http.StatusNotFound, "move_not_found", notFound)
		return cluster.Move{}, false
	}
	return mv, true
}

// outgoingMove finds a move of a partition this node owns by its id.
func (a *api) outgoingMove(w http.ResponseWriter, r *http.Request) (cluster.Move, bool) {
	if !a.inCluster(w) {
		return cluster.Move{}, false
	}
	notFound := fmt.Sprintf("no move %q out of this node under way", r.PathValue("id"))
	mv, ok := a.findMove(w, r, notFound)
	if !ok {
		return cluster.Move{}, false
	}
	if mv.From != a.opts.cluster.id {
		writeError(w, http.StatusNotFound, "move_not_found", notFound)
		return cluster.Move{}, false
	}
	return mv, true
}

func (a *api) writeListing(w http.ResponseWriter, r *http.Request, mv cluster.Move) {
	l, err := a.node.TransferListing(r.Context(), mv.Topic, mv.Partition)
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	if l.Incarnation != mv.Incarnation {
		writeError(w, http.StatusConflict, "move_changed", "the topic is another incarnation than the move's")
		return
	}
	out := transferBody{Move: mv, HighWatermark: l.HighWatermark, Known: l.Known, Segments: []segmentBody{}, Cursors: []cursorBody{}, Consumer: []segmentBody{}}
	for _, f := range l.Consumer {
		out.Consumer = append(out.Consumer, segmentBody{Name: f.Name, Size: f.Size})
	}
	for _, s := range l.Segments {
		out.Segments = append(out.Segments, segmentBody{Name: s.Name, Size: s.Size})
	}
	for _, c := range l.Cursors {
		out.Cursors = append(out.Cursors, cursorBody{Name: c.Name, Position: c.Position})
	}
	writeJSON(w, http.StatusOK, out)
}

// moveListing lists the partition's files while its old owner still
// serves it: the sealed segments, copied before the freeze.
func (a *api) moveListing(w http.ResponseWriter, r *http.Request) {
	if _, ok := query(w, r); !ok {
		return
	}
	mv, ok := a.outgoingMove(w, r)
	if !ok {
		return
	}
	if mv.State == cluster.MoveFrozen {
		// A pull taken up again after the freeze: the log stays closed
		// (a freeze call whose answer was lost may have left it open).
		if err := a.node.FreezePartition(r.Context(), mv.Topic, mv.Partition); err != nil {
			a.writeNodeError(w, r, err)
			return
		}
	}
	a.writeListing(w, r, mv)
}

// moveFile streams the first size bytes of one file of the listing.
func (a *api) moveFile(w http.ResponseWriter, r *http.Request) {
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
	f, err := a.node.OpenTransferFile(r.Context(), mv.Topic, mv.Partition, r.PathValue("name"))
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	if st.Size < size {
		writeError(w, http.StatusConflict, "move_changed", fmt.Sprintf("the file holds %d bytes, fewer than the %d asked", st.Size, size))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, io.NewSectionReader(f, 0, size)); err != nil {
		a.logger.Warn("streaming a file to a move's new owner", zap.String("move", mv.ID), zap.Error(err))
	}
}

// freezeMove stops this node serving the partition (the move's record
// frozen, then its log closed between two commits) and lists its final
// files. Asked again of a frozen move, it lists them again.
func (a *api) freezeMove(w http.ResponseWriter, r *http.Request) {
	if _, ok := query(w, r); !ok {
		return
	}
	mv, ok := a.outgoingMove(w, r)
	if !ok {
		return
	}
	if mv.State == cluster.MoveRequested {
		frozen, err := a.opts.cluster.ms.FreezeMove(r.Context(), mv, time.Now())
		if errors.Is(err, cluster.ErrMoveChanged) {
			writeError(w, http.StatusConflict, "move_changed", "the move changed meanwhile (cancelled?)")
			return
		}
		if err != nil {
			a.writeNodeError(w, r, err)
			return
		}
		mv = frozen
		a.logger.Info("partition frozen for its move: served no more here", zap.String("move", mv.ID),
			zap.String("topic", mv.Topic), zap.Int("partition", mv.Partition), zap.String("to", mv.To))
	}
	if err := a.node.FreezePartition(r.Context(), mv.Topic, mv.Partition); err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	a.writeListing(w, r, mv)
}

// releasePartition drops this node's copy of a partition once etcd
// confirms another node owns it (a move's new owner calls it after the
// move completed).
func (a *api) releasePartition(w http.ResponseWriter, r *http.Request) {
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
	if err := a.opts.cluster.dropIfMoved(r.Context(), a.node, topic, p, true); err != nil {
		if errors.Is(err, runtime.ErrAssigned) || errors.Is(err, runtime.ErrReceiveInProgress) {
			writeError(w, http.StatusConflict, "move_changed", "the partition is this node's, or moving here")
			return
		}
		a.writeNodeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
