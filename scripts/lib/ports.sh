# Sourced by the scripts that start servers of their own: a free TCP port
# on loopback (the kernel's pick; free when asked, so start the server at
# once).

# free_port: prints a port nothing listens on.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
