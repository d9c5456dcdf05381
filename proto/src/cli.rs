//! Checks shared by the three command lines (drsctl, drsd, drs-hook): each
//! runs [`undocumented_positionals`] over its clap definition in a test, so
//! `--help` explains every argument a user must type.

/// Every positional argument, anywhere under `command`, that has no help
/// line or no value name, as `"drsctl clone <arg>"`.
pub fn undocumented_positionals(command: &clap::Command) -> Vec<String> {
    let mut found = Vec::new();
    walk(command, command.get_name(), &mut found);
    found
}

fn walk(command: &clap::Command, trail: &str, found: &mut Vec<String>) {
    for arg in command.get_positionals() {
        let named = arg.get_value_names().is_some_and(|n| !n.is_empty());
        if arg.get_help().is_none() || !named {
            found.push(format!("{trail} <{}>", arg.get_id()));
        }
    }
    for sub in command.get_subcommands() {
        walk(sub, &format!("{trail} {}", sub.get_name()), found);
    }
}

#[cfg(test)]
mod tests {
    use super::undocumented_positionals;

    #[test]
    fn a_positional_without_help_or_value_name_is_named_with_its_command() {
        let cli = clap::Command::new("tool")
            .subcommand(
                clap::Command::new("get")
                    .arg(clap::Arg::new("oid").help("The object").value_name("OID"))
                    .arg(clap::Arg::new("dir").value_name("DIR"))
                    .arg(clap::Arg::new("out").help("Where")),
            )
            .arg(clap::Arg::new("flag").long("flag"));
        assert_eq!(
            undocumented_positionals(&cli),
            ["tool get <dir>", "tool get <out>"]
        );
    }
}
