package power

import "context"

// TaskReading is what a reading of a BMC's task monitor (TaskReader)
// said of the task of a command the BMC accepted for later.
type TaskReading int

const (
	// TaskNotEnded: the task runs (power/redfish: a 202 Accepted, or a
	// TaskState that is not final), or the answer tells nothing of it.
	TaskNotEnded TaskReading = iota
	// TaskEnded: the task ended (power/redfish: a final TaskState,
	// Completed, Exception, Killed or Cancelled, or the command's own
	// outcome): it can no longer take effect.
	TaskEnded
	// TaskGone: the BMC answered that there is no such task (power/redfish:
	// 404 Not Found or 410 Gone). A BMC deletes a task some time after it
	// ended (or forgets it when it restarts): read long enough after the
	// command was accepted, the task no longer runs.
	TaskGone
)

// String returns "not ended", "ended" or "gone".
func (r TaskReading) String() string {
	switch r {
	case TaskEnded:
		return "ended"
	case TaskGone:
		return "gone"
	default:
		return "not ended"
	}
}

// TaskReader is an optional interface of a Controller that can read the
// task monitor of a command its BMC accepted for later, by the address an
// earlier call noted (Queued.Monitor), also in another process: one
// reading, within ctx. The adapter takes monitor as hostile (it may come
// from a record written long ago) and reads only an address it would
// have taken from the BMC's own answer (power/redfish: a Redfish path on
// the endpoint's origin). A Pool's controllers have it: the read goes
// through the host's session, as a State call does.
type TaskReader interface {
	ReadTask(ctx context.Context, monitor string) (TaskReading, error)
}
