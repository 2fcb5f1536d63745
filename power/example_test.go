package power_test

import (
	"fmt"

	"github.com/rebootkit/rebootkit/power"
)

// Decisions act on the class of a power call's outcome, not on its text.
func ExampleClassify() {
	errs := []error{
		nil,
		&power.Error{Op: "off soft", Class: power.ClassUnsupported, Status: 400, Message: "GracefulShutdown not allowed"},
		&power.Error{Op: "on", Class: power.ClassBusy, Status: 409},
		fmt.Errorf("connect: %w", power.ErrFailed),
	}
	for _, err := range errs {
		fmt.Println(power.Classify(err))
	}
	fmt.Println(errs[1])
	// Output:
	// none
	// unsupported
	// busy
	// failed
	// power: off soft: unsupported (status 400): GracefulShutdown not allowed
}
