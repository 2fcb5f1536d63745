// Package remediation remediates a failed node by power-cycling its
// bare-metal host: power the host off, delete the Node object (or taint it
// out-of-service) while the host is known to be off, power the host back
// on, and wait for the node to return.
//
// It drives the reboot package's API: it adds and removes the keyed
// annotation reboot.metal3.io/machine-remediation on the host, with a hard
// mode (fencing must not wait for a soft shutdown) and the Machine's UID as
// the value.
package remediation
