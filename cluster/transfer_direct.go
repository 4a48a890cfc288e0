package cluster

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// DirectTransfer is a Transfer between Participants of one process: each
// call is the source Participant's own method, as package server's
// handlers call it, with nothing between (tests, and a program that runs
// several nodes in one process). A source is found by its node id; its
// address is not used. The zero value is ready; Add every participant a
// pull may come from.
type DirectTransfer struct {
	mu      sync.Mutex
	sources map[string]*Participant // by node id; under mu
}

// Add makes p a source this transfer reaches.
func (d *DirectTransfer) Add(p *Participant) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sources == nil {
		d.sources = map[string]*Participant{}
	}
	d.sources[p.ID()] = p
}

// source is the participant src names.
func (d *DirectTransfer) source(src Location) (*Participant, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.sources[src.NodeID]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("cluster: no participant %q in this process", src.NodeID)
}

// outgoing finds the move id on its source, as the source's handlers do.
func (d *DirectTransfer) outgoing(ctx context.Context, src Location, id string) (*Participant, Move, error) {
	p, err := d.source(src)
	if err != nil {
		return nil, Move{}, err
	}
	mv, err := p.OutgoingMove(ctx, id)
	return p, mv, err
}

// Listing implements Transfer.
func (d *DirectTransfer) Listing(ctx context.Context, src Location, mv Move) (TransferListing, error) {
	p, found, err := d.outgoing(ctx, src, mv.ID)
	if err != nil {
		return TransferListing{}, err
	}
	return p.MoveListing(ctx, found)
}

// File implements Transfer.
func (d *DirectTransfer) File(ctx context.Context, src Location, mv Move, f TransferFile) (io.ReadCloser, error) {
	p, found, err := d.outgoing(ctx, src, mv.ID)
	if err != nil {
		return nil, err
	}
	return p.OpenMoveFile(ctx, found, f.Name, f.Size)
}

// Freeze implements Transfer.
func (d *DirectTransfer) Freeze(ctx context.Context, src Location, mv Move) (TransferListing, error) {
	p, found, err := d.outgoing(ctx, src, mv.ID)
	if err != nil {
		return TransferListing{}, err
	}
	return p.FreezeMove(ctx, found)
}

// Release implements Transfer.
func (d *DirectTransfer) Release(ctx context.Context, src Location, topic string, partition int) error {
	p, err := d.source(src)
	if err != nil {
		return err
	}
	return p.ReleasePartition(ctx, topic, partition)
}
