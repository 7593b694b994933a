// Command spindle-agent is the agent a Spindle controller starts at the far
// end of every connection. It is not meant to be run by hand.
package main

import "github.com/spindle-rpc/spindle/agent"

func main() { agent.Main() }
