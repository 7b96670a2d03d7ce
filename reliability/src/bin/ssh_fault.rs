//! The ssh stand-in of the service soak: `ssh-fault <control dir> <ssh>
//! <args>...` runs the real ssh and relays the git conversation, injecting
//! the fault its thread's plan names (see `sluice_reliability::sshfault`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(sluice_reliability::sshfault::relay_main(&args));
}
