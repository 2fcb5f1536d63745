package etcd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/plan"
)

// requestHash identifies a Create request: the SHA-256 of the plan as
// given (its Version aside).
func requestHash(p plan.Plan) (string, error) {
	p.Version = ""
	raw, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// exists explains a Create refused because the plan's header or its
// summary (the plan was pruned) exists: nil if that plan was created by a
// Create of this same request (its answer was lost, and the caller tries
// again), else an error wrapping plan.ErrExists.
func (s *Store) exists(ctx context.Context, uuid, request string) error {
	taken := fmt.Errorf("%w: %s", plan.ErrExists, uuid)
	resp, err := s.cli.Get(ctx, s.headerKey(uuid))
	if err != nil {
		return fmt.Errorf("%w (and reading it failed: %v)", taken, err)
	}
	if len(resp.Kvs) > 0 {
		var h header
		if err := json.Unmarshal(resp.Kvs[0].Value, &h); err != nil || h.Request == "" || h.Request != request {
			return taken
		}
		return nil
	}
	// Created, ended and pruned: its summary records the request.
	if resp, err = s.cli.Get(ctx, s.summaryKey(uuid)); err != nil {
		return fmt.Errorf("%w (and reading it failed: %v)", taken, err)
	}
	if len(resp.Kvs) == 0 {
		return taken
	}
	var a Archived
	if err := json.Unmarshal(resp.Kvs[0].Value, &a); err != nil || a.Request == "" || a.Request != request {
		return taken
	}
	return nil
}

// errCreated: the plan Create writes exists already, created by the same
// request.
var errCreated = errors.New("etcd: created by this request already")

// The created key (PREFIX created) holds a random value that every write
// making a plan unfinished rewrites, in the same transaction: a Create's
// header, and the write of a plan that ended and is set unfinished again,
// or of an unfinished plan whose DryRun it clears (resumeCheck). Such a write compares the value its check of the other
// plans read with it: a plan made unfinished since that check makes it
// fail, and it checks again. A value, not a revision: after etcd was
// restored from a copy of its data directory, revisions are given again,
// random values are not.
func (s *Store) createdKey() string { return s.prefix + "created" }

// putCreated is the operation that rewrites the created key.
func (s *Store) putCreated() clientv3.Op {
	return clientv3.OpPut(s.createdKey(), newToken())
}

// sameCreated compares the created key with tok, as read (tokenOf).
func (s *Store) sameCreated(tok string) clientv3.Cmp {
	if tok == "" {
		return clientv3.Compare(clientv3.CreateRevision(s.createdKey()), "=", 0)
	}
	return clientv3.Compare(clientv3.Value(s.createdKey()), "=", tok[1:])
}

// othersChecked is what a check of the other plans read: the revision of
// the list, and the created key at that revision.
type othersChecked struct {
	at      int64
	created string
}

// unchanged are the comparisons that no plan was made unfinished since
// the check c: none created under headers/ since its revision (a Create
// of a version without the created key), and the created key as read.
func (s *Store) unchanged(c othersChecked) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(s.headersPrefix()), "<", c.at+1).WithPrefix(),
		s.sameCreated(c.created),
	}
}

// resumeCheck checks, for a write of header h over old that makes the
// plan hold servers it did not (plan.NewlyHolds: an ended plan set
// unfinished again, or DryRun cleared on an unfinished plan), the other
// unfinished plans as Create does (an error wrapping plan.ErrServerInPlan,
// and plan.ErrEndedOverlaps for an ended plan, if one holds a server of
// it), and returns the comparisons and the operation the write adds
// (nothing if the write does not make the plan hold servers). The plan's
// servers are read at the current revision: the write compares the
// header it read, and every write rewrites the header. A write setting
// DryRun on a plan stored unfinished and not a dry run is refused
// (plan.DryRunSetRefused): a dry run holds no server, and its reboots may
// have started.
func (s *Store) resumeCheck(ctx context.Context, uuid string, old, h header) ([]clientv3.Cmp, []clientv3.Op, error) {
	if plan.SetsDryRun(!ended(old), old.Plan.DryRun, h.Plan.DryRun) {
		return nil, nil, plan.DryRunSetRefused(uuid)
	}
	if !plan.NewlyHolds(!ended(old), old.Plan.DryRun, !ended(h), h.Plan.DryRun) {
		return nil, nil, nil
	}
	m, err := s.membersOf(ctx, uuid, old, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("plan: refusing to overwrite: %w", err)
	}
	p := h.Plan
	p.Reboots = make([]plan.Reboot, 0, len(m))
	for server := range m {
		p.Reboots = append(p.Reboots, plan.Reboot{ServerUUID: server})
	}
	c, err := s.checkOthers(ctx, p)
	if err != nil {
		switch {
		case errors.Is(err, plan.ErrServerInPlan) && ended(old):
			return nil, nil, plan.ResumeRefused(uuid, err)
		case errors.Is(err, plan.ErrServerInPlan):
			return nil, nil, plan.DryRunClearRefused(uuid, err)
		}
		return nil, nil, err
	}
	return s.unchanged(c), []clientv3.Op{s.putCreated()}, nil
}
