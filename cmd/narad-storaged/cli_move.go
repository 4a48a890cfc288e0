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
// lists the moves under way (--list) or the live nodes (--nodes), cancels
// a move (--cancel ID), drains a node (--drain, --undrain), or marks a
// node that is gone for good lost (--lost), through any node.
func runMove(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("move", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	to := fs.String("to", "", "the node id to move the partition to")
	list := fs.Bool("list", false, "list the moves under way instead")
	cancel := fs.String("cancel", "", "cancel the move of this id instead")
	drain := fs.String("drain", "", "mark this node draining instead: its partitions move to the others")
	undrain := fs.String("undrain", "", "mark this node no longer draining instead: it gets its share again")
	nodes := fs.Bool("nodes", false, "list the live nodes instead")
	lost := fs.String("lost", "", "mark this node, which is not live, lost instead: its partitions go to live nodes, empty, once its --fence-after has passed (what only its disk held is given up)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged move --topic T --partition P --to NODE\n"+
			"       narad-storaged move --list | --cancel ID | --nodes | --drain NODE | --undrain NODE | --lost NODE\n\n"+
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
	given := 0
	for _, on := range []bool{*to != "", *list, *cancel != "", *drain != "", *undrain != "", *nodes, *lost != ""} {
		if on {
			given++
		}
	}
	if given != 1 {
		fmt.Fprintln(stderr, "move: give one of --to, --list, --cancel, --nodes, --drain, --undrain and --lost")
		return 2
	}
	if *to == "" {
		c, err := cf.anyClient()
		if err != nil {
			fmt.Fprintln(stderr, "move:", err)
			return 2
		}
		enc := json.NewEncoder(stdout)
		switch {
		case *drain != "" || *undrain != "":
			node := *drain + *undrain
			if err := c.Drain(ctx, node, *drain != ""); err != nil {
				fmt.Fprintln(stderr, "move:", err)
				return 1
			}
			fmt.Fprintf(stdout, "node %s draining: %v\n", node, *drain != "")
			return 0
		case *lost != "":
			if err := c.MarkLost(ctx, *lost); err != nil {
				fmt.Fprintln(stderr, "move:", err)
				return 1
			}
			fmt.Fprintf(stdout, "node %s marked lost: its partitions go to live nodes, empty, once its fence horizon has passed\n", *lost)
			return 0
		case *nodes:
			list, err := c.Nodes(ctx)
			if err != nil {
				fmt.Fprintln(stderr, "move:", err)
				return 1
			}
			for _, n := range list {
				enc.Encode(n)
			}
			return 0
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
		for _, mv := range moves {
			enc.Encode(mv)
		}
		return 0
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
