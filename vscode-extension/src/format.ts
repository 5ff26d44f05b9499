/**
 * Format Document for .moe files, registered when the extension activates, before the
 * language server runs. The language client registers its formatting provider only once the
 * server has started (seconds: the interpreter probe, then the server's own imports) and
 * unregisters it while the server restarts; a Format Document in between got VS Code's
 * "There is no formatter for 'moe' files installed" dialog. This provider is
 * always there: it waits for the (re)start in progress, then asks the server. The client
 * registers no formatter of its own (a second one would make VS Code ask which to use).
 */
import * as path from "path";
import * as vscode from "vscode";
import {
  DocumentFormattingParams,
  DocumentFormattingRequest,
  DynamicFeature,
  FileFormattingOptions,
  LanguageClient,
  StaticFeature,
} from "vscode-languageclient/node";

/** The language client, less its document-formatting provider (this module's serves .moe). */
export class MplLanguageClient extends LanguageClient {
  // called by LanguageClient's constructor for each built-in feature
  public override registerFeature(feature: StaticFeature | DynamicFeature<unknown>): void {
    if (DynamicFeature.is(feature) && feature.registrationType.method === DocumentFormattingRequest.method) {
      return;
    }
    super.registerFeature(feature);
  }
}

/** The `files.*` settings a formatting request carries (as the client's own provider sends). */
function fileOptions(document: vscode.TextDocument): FileFormattingOptions {
  const files = vscode.workspace.getConfiguration("files", document);
  return {
    trimTrailingWhitespace: files.get<boolean>("trimTrailingWhitespace"),
    trimFinalNewlines: files.get<boolean>("trimFinalNewlines"),
    insertFinalNewline: files.get<boolean>("insertFinalNewline"),
  };
}

/**
 * Register the formatter for `selector`. `runningClient` resolves, once the server's start in
 * progress has finished, to the running client, or to undefined when no server runs (then
 * the user is told why nothing changed, with the log a click away).
 */
export function registerFormatter(
  selector: vscode.DocumentSelector,
  runningClient: () => Promise<LanguageClient | undefined>,
  showLog: () => void,
): vscode.Disposable {
  const provider: vscode.DocumentFormattingEditProvider = {
    async provideDocumentFormattingEdits(document, options, token) {
      const client = await runningClient();
      if (token.isCancellationRequested) {
        return undefined;
      }
      if (client === undefined) {
        void vscode.window
          .showWarningMessage(
            `MoE-PolicyLang: ${path.basename(document.fileName)} was not formatted: the language server is not running.`,
            "Show log",
          )
          .then((c) => (c === "Show log" ? showLog() : undefined));
        return undefined;
      }
      const params: DocumentFormattingParams = {
        textDocument: client.code2ProtocolConverter.asTextDocumentIdentifier(document),
        options: client.code2ProtocolConverter.asFormattingOptions(options, fileOptions(document)),
      };
      try {
        const edits = await client.sendRequest(DocumentFormattingRequest.type, params, token);
        if (token.isCancellationRequested) {
          return undefined;
        }
        return await client.protocol2CodeConverter.asTextEdits(edits, token);
      } catch (err) {
        return client.handleFailedRequest(DocumentFormattingRequest.type, token, err, undefined);
      }
    },
  };
  return vscode.languages.registerDocumentFormattingEditProvider(selector, provider);
}
