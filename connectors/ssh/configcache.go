package ssh

// ForgetConfigAnswers drops the `ssh -G` answers that connections in this
// process share for sshGTTL: the next connection asks ssh again, as the
// first connection of a new process does. The bench calls it before
// timing a connect that its baseline, a fresh `ssh` process, pays the
// configuration lookup for.
func ForgetConfigAnswers() {
	sshGAnswers.Lock()
	defer sshGAnswers.Unlock()
	clear(sshGAnswers.m)
}
