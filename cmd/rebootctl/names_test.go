package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/inventory"
)

// TestPassErrorsNameHostnames: the executor's pass errors (logged, and
// shown by plan show as the executor's last error) name servers by
// hostname, not UUID (issue 38, B.14; old code: "create-job for
// 00000000-...").
func TestPassErrorsNameHostnames(t *testing.T) {
	inv := inventory.Inventory{Servers: []inventory.Server{
		{UUID: "00000000-0000-4000-8000-000000000001", Hostname: "cn1"},
		{UUID: "00000000-0000-4000-8000-000000000002", Hostname: "cn2"},
	}}
	got := serverNames(inv).Replace("plan p1: create-job for 00000000-0000-4000-8000-000000000002: inventory: the server may be the machine this executor runs on")
	assert.Equal(t, "plan p1: create-job for cn2: inventory: the server may be the machine this executor runs on", got)
}
