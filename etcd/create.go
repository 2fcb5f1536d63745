package etcd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

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
