package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"
)

// runMove asks a cluster to move a partition (--topic, --partition, --to),
// lists the moves under way (--list), or cancels one (--cancel ID),
// through any node.
func runMove(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("move", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	to := fs.String("to", "", "the node id to move the partition to")
	list := fs.Bool("list", false, "list the moves under way instead")
	cancel := fs.String("cancel", "", "cancel the move of this id instead")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged move --topic T --partition P --to NODE\n"+
			"       narad-storaged move --list | --cancel ID\n\n"+
			"Asks a cluster to move a partition to another node (the move runs in the\n"+
			"background: the new owner copies the partition, the old owner stops\n"+
			"serving it for the final catch-up, then the new owner serves it); lists\n"+
			"the moves under way as JSON lines; or cancels one. Exit status: 0 done,\n"+
			"1 refused or failed, 2 usage.\n\n")
		fs.PrintDefaults()
	}
	if code, done := parseClientCommand(fs, args, stderr); done {
		return code
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if *list || *cancel != "" {
		if *list && *cancel != "" || *to != "" {
			fmt.Fprintln(stderr, "move: give one of --to, --list and --cancel")
			return 2
		}
		c, err := cf.anyClient()
		if err != nil {
			fmt.Fprintln(stderr, "move:", err)
			return 2
		}
		if *cancel != "" {
			if err := c.CancelMove(ctx, *cancel); err != nil {
				fmt.Fprintln(stderr, "move:", err)
				return 1
			}
			fmt.Fprintf(stdout, "cancelled move %s\n", *cancel)
			return 0
		}
		moves, err := c.Moves(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "move:", err)
			return 1
		}
		enc := json.NewEncoder(stdout)
		for _, mv := range moves {
			enc.Encode(mv)
		}
		return 0
	}
	if *to == "" {
		fmt.Fprintln(stderr, "move: --to is required (or --list, --cancel)")
		return 2
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "move:", err)
		return 2
	}
	mv, err := c.MovePartition(ctx, cf.topic, cf.partition, *to)
	if err != nil {
		fmt.Fprintln(stderr, "move:", err)
		return 1
	}
	fmt.Fprintf(stdout, "move %s: partition %d of %s from %s to %s, %s\n", mv.ID, mv.Partition, mv.Topic, mv.From, mv.To, mv.State)
	return 0
}
