import EncFSCLI

CommandLineTool.main(InspectCommand.run)
