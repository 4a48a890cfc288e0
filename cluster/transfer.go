package cluster

import (
	"context"
	"io"
)

// Transfer is how a move's new owner reaches the old one (the source),
// named by its Location, to pull a partition: the pulling side's calls,
// each answered by the source's Participant (MoveListing, OpenMoveFile,
// FreezeMove, ReleasePartition) wherever it runs. Package server's
// implementation calls the source's internal HTTP endpoints;
// DirectTransfer calls Participants of the same process.
//
// An error ends the pull (the move is pulled again after a pause, or, once
// frozen, cancelled); a Transfer neither retries nor interprets it.
type Transfer interface {
	// Listing lists the partition's files on the source while it still
	// serves the partition (MoveListing).
	Listing(ctx context.Context, src Location, mv Move) (TransferListing, error)
	// File reads the first f.Size bytes of one file of a listing
	// (OpenMoveFile); the caller closes it.
	File(ctx context.Context, src Location, mv Move, f TransferFile) (io.ReadCloser, error)
	// Freeze stops the source serving the partition and lists its final
	// files (FreezeMove); the listing's Move is the frozen one.
	Freeze(ctx context.Context, src Location, mv Move) (TransferListing, error)
	// Release asks the source to drop its copy of a partition that the
	// move completed made this node's (ReleasePartition).
	Release(ctx context.Context, src Location, topic string, p int) error
}

// TransferListing is what a move's source lists of a partition: the move
// (frozen, once the source froze it), its segment files in offset order
// (the last one the active segment), its boundary, its fan-out cursors'
// positions, its queue consumer's progress files and its topic's
// dictionary files (which its frames may name), which move with it.
type TransferListing struct {
	Move          Move
	Segments      []TransferFile
	HighWatermark int64
	Known         bool // false: no boundary on disk (runtime.TransferListing)
	Cursors       []TransferCursor
	Consumer      []TransferFile
	Dictionaries  []TransferFile
}

// TransferFile is one file of a listing: its name in the partition's
// directory, and its size when listed (a segment may grow after; what is
// past this size is not the listing's).
type TransferFile struct {
	Name string
	Size int64
}

// TransferCursor is a fan-out cursor's position file of a listing.
type TransferCursor struct {
	Name     string
	Position int64
}
