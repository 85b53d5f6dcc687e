import multipart from "@fastify/multipart";
import type { FastifyInstance, FastifyRequest } from "fastify";

/**
 * The web's multipart forms (a key file, a reserved-names file): one parser for every page that
 * takes a file, registered in that page's own scope so that no other page accepts multipart bodies.
 * The parts become the plain form (the CSRF check reads `_csrf` from the body); the one file and
 * whether a field was cut at the limit are kept aside for the page (`uploadOf`).
 */

export interface UploadedFile {
  /** The form field the file came in. */
  field: string;
  data: Buffer;
  /** Cut at the size limit. */
  truncated: boolean;
}

export interface Upload {
  /** The chosen file; null when none was chosen (browsers send an empty part without a file name). */
  file: UploadedFile | null;
  /** A field cut at the size limit. */
  truncated: boolean;
}

const uploads = new WeakMap<FastifyRequest, Upload>();

/** The file part of a multipart request as the parser read it; null for a plain form. */
export const uploadOf = (request: FastifyRequest): Upload | null => uploads.get(request) ?? null;

/**
 * Multipart bodies in `scope`: a file or a field of at most `maxBytes` (held in memory; a longer
 * one is cut and marked), one file, 8 fields, 10 parts (more is a 413). A body the parser cannot
 * read (cut short, no boundary) is the sender's fault: a 400.
 */
export async function acceptUploads(scope: FastifyInstance, maxBytes: number): Promise<void> {
  await scope.register(multipart, {
    throwFileSizeLimit: false,
    limits: { fileSize: maxBytes, fieldSize: maxBytes, files: 1, fields: 8, parts: 10 },
  });
  scope.addHook("preValidation", async (request) => {
    if (!request.isMultipart()) return;
    const fields: Record<string, string> = {};
    const upload: Upload = { file: null, truncated: false };
    // A name given twice counts as not given (a form of ours never repeats one).
    const seen = new Set<string>();
    const repeated = new Set<string>();
    try {
      for await (const part of request.parts()) {
        if (seen.has(part.fieldname)) repeated.add(part.fieldname);
        seen.add(part.fieldname);
        if (part.type === "field") {
          if (typeof part.value !== "string") continue;
          fields[part.fieldname] = part.value;
          if (part.valueTruncated) upload.truncated = true;
        } else {
          const data = await part.toBuffer();
          if (part.filename !== "" || data.length > 0)
            upload.file = { field: part.fieldname, data, truncated: part.file.truncated };
        }
      }
    } catch (error) {
      // The parser's limits carry their status (413); its complaints about the body carry none.
      if (error instanceof Error && !("statusCode" in error)) Object.assign(error, { statusCode: 400 });
      throw error;
    }
    for (const name of repeated) delete fields[name];
    if (upload.file && repeated.has(upload.file.field)) upload.file = null;
    request.body = fields;
    uploads.set(request, upload);
  });
}
