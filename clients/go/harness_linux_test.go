package herenow

import (
	"os/exec"
	"syscall"
)

// dieWithParent stops a server the tests started when the test binary
// dies (a -timeout panic, a kill), so no server outlives its tests.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
